"""The end of a training run: the final weights (best epochs averaged when that helps on val), their
storage precision, and the beam-search scores and metrics.json that describe them."""
from __future__ import annotations

import json
import os
import platform
import shlex
from pathlib import Path

import torch

from ..checkpoint import checkpoint_folder, read_metrics, save_checkpoint
from ..core.config import ModelConfig
from ..core.model import Transformer
from ..corpus.data import read_parallel
from ..corpus.mix import mix_parts, mix_record
from ..corpus.scoring import score, translate_corpus
from ..decoding.translator import Translator
from ..paths import portable_path, portable_words
from ..tokenizer import Tokenizer
from .averaging import average_state_dicts
from .diversify import PROVENANCE_FILE

DISTILLED_FILE = "distilled.json"  # what `transformer.distill student` leaves beside a student's training folder

FP16_MAX_BLEU_COST = 0.2  # store weights in half precision when that costs at most this much val BLEU


def hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    processor = platform.processor() or platform.machine()
    return f"{processor} CPU, {os.cpu_count()} cores, torch {torch.get_num_threads()} threads"


def diversified_record(data_dir) -> dict:
    """How a grown or distilled training split was made (transformer.diversify and transformer.distill leave their
    record beside the files), if it was."""
    records = {"diversified": Path(data_dir) / PROVENANCE_FILE, "distilled": Path(data_dir) / DISTILLED_FILE}
    return {key: json.loads(path.read_text()) for key, path in records.items() if path.is_file()}


def finish(out, model, result, tokenizer, tokenizer_file, extra_config, settings, train_corpus, val, args, device,
           command: str, invocation: list[str]) -> dict:
    """Writes the final checkpoint and metrics.json into `out`; returns the scores. `command` redoes the whole run
    (see reproduce.py); `invocation` is the command line this last session was started with."""
    final, selection = select_final_model(model.config, result, tokenizer, val, args, device)
    dtype, fp16_cost = storage_dtype(final, tokenizer, val, args, selection["val_bleu"], device)
    save_checkpoint(out, final, tokenizer_file, extra_config, dtype=dtype)
    translator = Translator.from_pretrained(
        out, device=args.device
    )  # exactly what was written, fp16 round trip included
    decoding = {"strategy": "beam", "beam_size": args.beam_size, "length_penalty": args.length_penalty}
    scores = {"val": score(translate_corpus(translator, val.source, "beam", beam_size=args.beam_size,
                                            length_penalty=args.length_penalty), val.target)}
    for name, (folder, split) in reported_tests(args).items():
        test = read_parallel(folder, split, args.src, args.tgt)
        scores[name] = score(translate_corpus(translator, test.source, "beam", beam_size=args.beam_size,
                                              length_penalty=args.length_penalty), test.target)
    metrics = {
        "model": model.config.to_dict(), "parameters": model.num_parameters(),
        "data": {**{split: {"files": [portable_path(os.path.relpath(c.source_file)),
                                      portable_path(os.path.relpath(c.target_file))], "lines": len(c)}
                    for split, c in (("train", train_corpus), ("val", val))}, **diversified_record(args.data_dir),
                 **mix_record(args.data_dir)},
        "tokenizer": {"type": "sentencepiece unigram", "vocab_size": tokenizer.vocab_size,
                      "trained_on": "train split, both languages"},
        "training": {**vars(settings), "epochs_run": len(result.reports), "updates": result.updates,
                     "wall_minutes": round(result.seconds / 60, 1), "stopped_by_time_budget": result.stopped_early,
                     "hardware": hardware(device), "torch": torch.__version__,
                     "init_from": portable_path(args.init_from) if args.init_from else None,
                     "processes": int(os.environ.get("WORLD_SIZE", "1")),
                     # recorded for other machines: no path of this one (transformer/paths.py)
                     "command": shlex.join(portable_words(shlex.split(command))),
                     "invocation": "python -m transformer.train " + shlex.join(portable_words(invocation))},
        # a warm start carries the stages behind its starting weights, so the card tells the whole story
        "earlier_stages": earlier_stages(args.init_from) if args.init_from else [],
        "epochs": [vars(r) for r in result.reports],
        "selection": selection, "weights_dtype": str(dtype).replace("torch.", ""), "fp16_val_bleu_cost": fp16_cost,
        "decoding": decoding, "scores": scores,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return scores


STAGE_KEYS = ("epochs_run", "updates", "wall_minutes", "hardware", "torch", "init_from", "lr", "warmup", "max_tokens",
              "command")


def earlier_stages(init_from) -> list[dict]:
    """The stages that made the weights a warm start begins from: its own earlier stages, then its last one, each
    as its metrics.json recorded it (a starting folder without one is a stage of unknown record)."""
    metrics = read_metrics(checkpoint_folder(init_from)) or {}
    if "training" not in metrics:
        return [{"init_from": None, "note": f"{portable_path(init_from)} records no training"}]
    last = {key: metrics["training"].get(key) for key in STAGE_KEYS}
    return [*metrics.get("earlier_stages", []), {**last, "checkpoint": portable_path(init_from),
                                                 "data": metrics.get("data", {}).get("train", {}).get("files")}]


def reported_tests(args) -> dict[str, tuple]:
    """The test sets a run reports (never selects on), by the name its scores take: --test-split in --data-dir,
    or for a mixed folder every test split of every corpus, named CORPUS/SPLIT."""
    parts = mix_parts(args.data_dir)
    if parts:
        return {f"{part.name}/{split}": (part.folder, split) for part in parts for split in part.tests}
    return {args.test_split: (args.data_dir, args.test_split)} if args.test_split else {}


def model_with(config: ModelConfig, state: dict, device) -> Transformer:
    model = Transformer(config).to(device)
    model.load_state_dict(state)
    return model.eval()


def val_bleu(model: Transformer, tokenizer: Tokenizer, val, args) -> float:
    hypotheses = translate_corpus(Translator(model, tokenizer), val.source, "greedy", batch_size=100)
    return score(hypotheses, val.target)["bleu"]


def select_final_model(config, result, tokenizer, val, args, device) -> tuple[Transformer, dict]:
    """The average of the best epochs by val BLEU, unless the single best epoch scores higher on val."""
    best_bleu, best_epoch, best_state = result.best_states[0]
    choice = {"kind": "best epoch", "epochs": [best_epoch], "val_bleu": best_bleu}
    final = model_with(config, best_state, device)
    if len(result.best_states) > 1:
        averaged = model_with(config, average_state_dicts([s for _, _, s in result.best_states]), device)
        averaged_bleu = val_bleu(averaged, tokenizer, val, args)
        if averaged_bleu >= best_bleu:
            choice = {"kind": "average", "epochs": [e for _, e, _ in result.best_states], "val_bleu": averaged_bleu}
            final = averaged
        choice["average_val_bleu"], choice["best_epoch_val_bleu"] = averaged_bleu, best_bleu
    print(
        f"final model: {choice['kind']} of epochs {choice['epochs']} (greedy val BLEU {choice['val_bleu']})", flush=True
    )
    return final, choice


def storage_dtype(model, tokenizer, val, args, bleu_fp32: float, device) -> tuple[torch.dtype, float]:
    """float16 weights when the round trip costs at most FP16_MAX_BLEU_COST greedy val BLEU."""
    rounded = model_with(model.config, {k: v.half().float() for k, v in model.state_dict().items()}, device)
    cost = round(bleu_fp32 - val_bleu(rounded, tokenizer, val, args), 2)
    return (torch.float16 if cost <= FP16_MAX_BLEU_COST else torch.float32), cost
