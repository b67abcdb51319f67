"""Train an encoder-decoder Transformer on a parallel corpus and write a checkpoint folder.

    python -m transformer.train --src en --tgt de --out checkpoints/en-de

Reads {train,val}.{src,tgt} (and test_2016_flickr, only to report it at the end) from --data-dir,
trains a joint sentencepiece vocabulary on the training split only, trains with token-count batches,
validates (loss and greedy BLEU) after every epoch, averages the best checkpoints by val BLEU, and
writes config.json, model.safetensors, spm.model and metrics.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

from ..checkpoint import TOKENIZER_FILE, load_checkpoint, save_checkpoint, unique_state_dict
from ..core.config import NORM_PLACEMENTS, POSITIONAL_ENCODINGS, ModelConfig
from ..core.model import Transformer
from ..decoding.translator import Translator
from ..tokenizer import Tokenizer
from .averaging import average_state_dicts
from .data import default_data_dir, read_parallel
from .evaluate import score, translate_corpus
from .trainer import TrainingSettings, train

FP16_MAX_BLEU_COST = 0.2  # store weights in half precision when that costs at most this much val BLEU


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m transformer.train", description=__doc__,
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    data = p.add_argument_group("data")
    data.add_argument("--data-dir", default=default_data_dir(), help="folder of {split}.{lang} files")
    data.add_argument("--src", default="en", help="source language suffix")
    data.add_argument("--tgt", default="de", help="target language suffix")
    data.add_argument("--test-split", default="test_2016_flickr", help="split reported (never used for selection); '' to skip")
    data.add_argument("--out", required=True, help="checkpoint folder to write")
    data.add_argument("--vocab-size", type=int, default=8000, help="joint sentencepiece vocabulary size")
    model = p.add_argument_group("model (ignored with --init-from)")
    model.add_argument("--d-model", type=int, default=256)
    model.add_argument("--n-heads", type=int, default=4)
    model.add_argument("--n-layers", type=int, default=3, help="layers per stack")
    model.add_argument("--d-ff", type=int, default=1024)
    model.add_argument("--dropout", type=float, default=0.2)
    model.add_argument("--attention-dropout", type=float, default=0.0)
    model.add_argument("--max-len", type=int, default=128, help="longest sequence (positions)")
    model.add_argument("--norm", choices=NORM_PLACEMENTS, default="pre")
    model.add_argument("--pos-encoding", choices=POSITIONAL_ENCODINGS, default="sinusoidal")
    model.add_argument("--no-share-embeddings", action="store_true", help="separate source/target embeddings")
    model.add_argument("--no-tie-output", action="store_true", help="untie the output projection from the target embedding")
    opt = p.add_argument_group("optimisation")
    opt.add_argument("--epochs", type=int, default=30)
    opt.add_argument("--max-minutes", type=float, default=None, help="stop cleanly and save once this much time is spent")
    opt.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per batch")
    opt.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    opt.add_argument("--warmup", type=int, default=800, help="warm-up updates")
    opt.add_argument("--label-smoothing", type=float, default=0.1)
    opt.add_argument("--clip-norm", type=float, default=1.0)
    opt.add_argument("--average", type=int, default=5, help="average the best N epochs by val BLEU (1: no averaging)")
    opt.add_argument("--no-bf16", action="store_true", help="train in float32 even where bfloat16 autocast is supported")
    opt.add_argument("--seed", type=int, default=1)
    opt.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    opt.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    opt.add_argument("--init-from", help="continue from this checkpoint folder (its config and tokenizer), fresh optimizer")
    opt.add_argument("--save-epochs", action="store_true",
                     help="also write every epoch's weights (float16) to OUT/epochs/, for the attention-across-training timeline")
    dec = p.add_argument_group("decoding used for the reported scores")
    dec.add_argument("--beam-size", type=int, default=4)
    dec.add_argument("--length-penalty", type=float, default=0.6)
    return p


def hardware(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} CPU, {os.cpu_count()} cores, torch {torch.get_num_threads()} threads"


def main(argv=None) -> None:
    args = build_parser().parse_args(argv)
    if args.data_dir is None:
        sys.exit("error: no --data-dir given and ../shared/data/multi30k does not exist "
                 "(python -m transformer.data download --dest DIR fetches Multi30k)")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but CUDA is not available")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    out = Path(args.out)
    train_corpus = read_parallel(args.data_dir, "train", args.src, args.tgt)
    val = read_parallel(args.data_dir, "val", args.src, args.tgt)

    with tempfile.TemporaryDirectory() as scratch:
        if args.init_from:
            model, tokenizer, _ = load_checkpoint(args.init_from, device)
            tokenizer_file = Path(args.init_from) / TOKENIZER_FILE
        else:
            tokenizer_file = Path(scratch) / TOKENIZER_FILE
            tokenizer = Tokenizer.train([train_corpus.source_file, train_corpus.target_file], tokenizer_file, args.vocab_size)
            config = ModelConfig(
                src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=args.d_model,
                n_heads=args.n_heads, n_layers=args.n_layers, d_ff=args.d_ff, dropout=args.dropout,
                attention_dropout=args.attention_dropout, max_len=args.max_len, norm=args.norm, final_norm=args.norm == "pre",
                pos_encoding=args.pos_encoding, share_embeddings=not args.no_share_embeddings,
                tie_output=not args.no_tie_output, pad_id=tokenizer.pad_id,
            )
            model = Transformer(config).to(device)
        settings = TrainingSettings(max_tokens=args.max_tokens, epochs=args.epochs, max_minutes=args.max_minutes, lr=args.lr,
                                    warmup=args.warmup, label_smoothing=args.label_smoothing, clip_norm=args.clip_norm,
                                    bf16=not args.no_bf16, keep_best=args.average, seed=args.seed)
        extra_config = {"languages": {"src": args.src, "tgt": args.tgt},
                        "tokenizer": {"type": "sentencepiece", "file": TOKENIZER_FILE, "vocab_size": tokenizer.vocab_size,
                                      "joint": True, "pad_id": 0, "unk_id": 1, "bos_id": 2, "eos_id": 3}}
        print(f"model: {model.num_parameters():,} parameters; train {len(train_corpus):,} pairs, val {len(val):,}", flush=True)

        bar = tqdm(unit="batch", dynamic_ncols=True, mininterval=2)  # total set once the first epoch is batched
        tokens_seen, bar_started = [0], time.perf_counter()

        def on_batch(updates, tokens, loss, batches_per_epoch):
            if bar.total is None:
                bar.total = settings.epochs * batches_per_epoch
            tokens_seen[0] += tokens
            rate = tokens_seen[0] / (time.perf_counter() - bar_started)
            bar.set_postfix_str(f"loss {loss:.3f} {rate:,.0f} tok/s", refresh=False)
            bar.update(1)

        def on_epoch(report, result):
            tqdm.write(f"epoch {report.epoch}: updates {report.updates} train loss {report.train_loss:.3f} "
                       f"val loss {report.val_loss:.3f} val BLEU {report.val_bleu:.2f} chrF {report.val_chrf:.2f} "
                       f"({report.minutes:.1f} min)")
            # the best epoch so far goes to disk, so an interrupted run still leaves a usable checkpoint
            save_checkpoint(out, model_with(model.config, result.best_states[0][2], device), tokenizer_file, extra_config)
            if args.save_epochs:
                save_epoch_weights(out / "epochs", report.epoch, model)

        result = train(model, tokenizer, train_corpus, val, settings, on_batch=on_batch, on_epoch=on_epoch)
        bar.close()
        if not result.reports:
            sys.exit("error: training stopped before the first epoch ended; raise --max-minutes")
        final, selection = select_final_model(model.config, result, tokenizer, val, args, device)
        dtype, fp16_cost = storage_dtype(final, tokenizer, val, args, selection["val_bleu"], device)
        save_checkpoint(out, final, tokenizer_file, extra_config, dtype=dtype)

    translator = Translator.from_pretrained(out, device=args.device)  # exactly what was written, fp16 round trip included
    decoding = {"strategy": "beam", "beam_size": args.beam_size, "length_penalty": args.length_penalty}
    val_scores = score(translate_corpus(translator, val.source, "beam", beam_size=args.beam_size,
                                            length_penalty=args.length_penalty), val.target)
    scores = {"val": val_scores}
    if args.test_split:
        test = read_parallel(args.data_dir, args.test_split, args.src, args.tgt)
        scores[args.test_split] = score(translate_corpus(translator, test.source, "beam", beam_size=args.beam_size,
                                                         length_penalty=args.length_penalty), test.target)
    metrics = {
        "model": model.config.to_dict(), "parameters": model.num_parameters(),
        "data": {split: {"files": [os.path.relpath(c.source_file), os.path.relpath(c.target_file)], "lines": len(c)}
                 for split, c in (("train", train_corpus), ("val", val))},
        "tokenizer": {"type": "sentencepiece unigram", "vocab_size": tokenizer.vocab_size, "trained_on": "train split, both languages"},
        "training": {**vars(settings), "epochs_run": len(result.reports), "updates": result.updates,
                     "wall_minutes": round(result.seconds / 60, 1), "stopped_by_time_budget": result.stopped_early,
                     "hardware": hardware(device), "torch": torch.__version__, "init_from": args.init_from,
                     "command": "python -m transformer.train " + " ".join(argv if argv is not None else sys.argv[1:])},
        "epochs": [vars(r) for r in result.reports],
        "selection": selection, "weights_dtype": str(dtype).replace("torch.", ""), "fp16_val_bleu_cost": fp16_cost,
        "decoding": decoding, "scores": scores,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    for split, s in scores.items():
        print(f"{split}: BLEU {s['bleu']} chrF {s['chrf']} (beam {args.beam_size})  {s['bleu_signature']}")
    print(f"wrote {out}")


def save_epoch_weights(folder: Path, epoch: int, model: Transformer) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = {name: t.detach().to("cpu", torch.float16).contiguous() for name, t in unique_state_dict(model).items()}
    save_file(state, str(folder / f"epoch-{epoch:03d}.safetensors"), metadata={"format": "pt", "epoch": str(epoch)})


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
    print(f"final model: {choice['kind']} of epochs {choice['epochs']} (greedy val BLEU {choice['val_bleu']})", flush=True)
    return final, choice


def storage_dtype(model, tokenizer, val, args, bleu_fp32: float, device) -> tuple[torch.dtype, float]:
    """float16 weights when the round trip costs at most FP16_MAX_BLEU_COST greedy val BLEU."""
    rounded = model_with(model.config, {k: v.half().float() for k, v in model.state_dict().items()}, device)
    cost = round(bleu_fp32 - val_bleu(rounded, tokenizer, val, args), 2)
    return (torch.float16 if cost <= FP16_MAX_BLEU_COST else torch.float32), cost


if __name__ == "__main__":
    main()
