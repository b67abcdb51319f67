"""What the Hugging Face families cost at their real shapes: a random model of each (NLLB-200-distilled-600M, mBART-50,
T5-base, FLAN-T5-small, BART-base), saved with save_pretrained, converted by transformer.convert, then greedy with
every attention map captured, ours (`Translator.translate(capture=True)`) beside Hugging Face's
`generate(output_attentions=True, return_dict_in_generate=True)` on the same weights and sentences, and ours again
from a `--dtype float16` conversion (every weight rounded to float16: decoding reads half the bytes, through the
compiled step where the family's layers fit it; close to Hugging Face's numbers, not equal). Prints JSON.

    python bench/bench_families.py [--families nllb-600m t5-base ...] [--sentences 3] [--rounds 2] [--tokens 24]
                                   [--threads 2]

Each side runs in a process of its own, so its memory is its own: load_s, rss_mb after loading, peak_rss_mb (VmHWM)
at the end, and ms_per_token, the median over rounds of a round's time over the tokens it produced. Both produce the
same ids (`same_ids`): random weights rarely choose </s>, so each sentence runs to `--tokens` (a forced language code
counts as one). The tokenizer is a tiny one of the family's kind (tests/hub_fixtures.py): the weights, not the
tokenizer, set the cost. Needs transformers (pip install ".[marian]"); NLLB-600M's side of Hugging Face peaks near
5 GB while it builds the model.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BART_LIKE = dict(pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, dropout=0.0,
                 forced_eos_token_id=None)
from bench.bench_marian import memory_mb  # noqa: E402  (after the path above)

SHAPES = {  # family fixture, Hugging Face config class, the real model's shape
    "nllb-600m": ("nllb", "M2M100Config", dict(
        vocab_size=256206, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
        decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024,
        scale_embedding=True, activation_function="relu", **BART_LIKE)),
    "mbart-50": ("mbart50", "MBartConfig", dict(
        vocab_size=250054, d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
        decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024,
        scale_embedding=True, activation_function="gelu", **BART_LIKE)),
    "t5-base": ("t5", "T5Config", dict(
        vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, feed_forward_proj="relu",
        dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)),
    "flan-t5-small": ("flan-t5", "T5Config", dict(
        vocab_size=32128, d_model=512, d_kv=64, d_ff=1024, num_layers=8, num_heads=6, feed_forward_proj="gated-gelu",
        tie_word_embeddings=False, dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)),
    "bart-base": ("bart", "BartConfig", dict(
        vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
        decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024,
        scale_embedding=False, activation_function="gelu", **BART_LIKE)),
}
SENTENCES = ["Where is the train station?", "Two men are playing chess outside.",
             "I would like a cup of coffee, please.", "The cat sleeps on the warm sofa."]


def write_hf_folder(name: str, folder: Path) -> dict:
    """The random model of `name`'s shape and a tiny tokenizer of its family, as save_pretrained writes them; the
    languages to convert with."""
    import torch
    import transformers

    from tests.hub_fixtures import BUILDERS

    fixture, config_class, shape = SHAPES[name]
    folder.mkdir()
    tokenizer, _, languages = BUILDERS[fixture](folder)
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**shape)
    model = transformers.AutoModelForSeq2SeqLM.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return languages


def run_side(side: str, hf_folder: Path, converted: Path, sentences: list[str], rounds: int, tokens: int,
             threads: int, forced: list[int]) -> dict:
    """One side, in this process: load, warm up, time; its figures and the ids it produced."""
    import torch

    torch.set_num_threads(threads)
    from transformer import Translator

    started = time.perf_counter()
    if side.startswith("ours"):
        translator = Translator.from_pretrained(converted if side == "ours" else converted.parent / "float16")

        def decode(text: str) -> list[int]:
            return translator.translate(text, strategy="greedy", max_length=tokens, capture=True).tgt_ids

        from transformer.core.fused_step import why_not_fused
        from transformer.core.half_linear import KERNEL

        KERNEL.wait(timeout=600)  # built before the clock starts, as a server's start-up builds it
        step = why_not_fused(translator.model, 1) or "the compiled step"
    else:
        import transformers
        from transformers.utils import logging as hf_logging

        step = "Hugging Face's generate"
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(hf_folder, attn_implementation="eager").eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(hf_folder)
        generation = transformers.GenerationConfig(
            max_new_tokens=tokens, num_beams=1, do_sample=False, eos_token_id=model.config.eos_token_id,
            pad_token_id=model.config.pad_token_id, decoder_start_token_id=model.config.decoder_start_token_id,
            forced_bos_token_id=forced[0] if forced else None, suppress_tokens=[model.config.pad_token_id],
            output_attentions=True, return_dict_in_generate=True)

        def decode(text: str) -> list[int]:
            with torch.inference_mode():
                out = model.generate(**tokenizer(text, return_tensors="pt"), generation_config=generation)
            return out.sequences[0, 1:].tolist()
    load_s, loaded_rss = time.perf_counter() - started, memory_mb()
    produced = [decode(text) for text in sentences]  # warm-up, and the ids compared
    per_token = []
    for _ in range(rounds):
        started, count = time.perf_counter(), 0
        for text in sentences:
            count += len(decode(text))
        per_token.append(1000 * (time.perf_counter() - started) / count)
    return {"load_s": round(load_s, 2), "rss_mb": round(loaded_rss, 1), "peak_rss_mb": round(memory_mb("VmHWM"), 1),
            "ms_per_token": round(statistics.median(per_token), 2),
            "ms_per_token_rounds": [round(t, 2) for t in per_token], "decoding": step, "ids": produced}


def bench_family(name: str, args) -> dict:
    from transformer.convert import convert

    with tempfile.TemporaryDirectory() as work:
        hf_folder, converted, halved = Path(work) / "hf", Path(work) / "converted", Path(work) / "float16"
        languages = write_hf_folder(name, hf_folder)
        started = time.perf_counter()
        convert(hf_folder, converted, **languages)
        convert_s = time.perf_counter() - started
        convert(hf_folder, halved, dtype="float16", **languages)
        settings = json.loads((converted / "config.json").read_text())
        forced = ([settings["tokenizer"]["languages"][languages["target_lang"]]] if languages else [])
        command = [sys.executable, __file__, "--sentences", str(args.sentences), "--rounds", str(args.rounds),
                   "--tokens", str(args.tokens), "--threads", str(args.threads), "--folders", str(hf_folder),
                   str(converted), "--forced", json.dumps(forced)]
        sides = {}
        for side in ("ours", "theirs", "ours_float16"):
            result = subprocess.run([*command, "--side", side], capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise SystemExit(f"bench_families: {name}, the {side} process failed:\n{result.stderr[-3000:]}")
            sides[side] = json.loads(result.stdout.strip().splitlines()[-1])
    theirs = sides["theirs"].pop("ids")
    same, half_ids = sides["ours"].pop("ids") == theirs, sides["ours_float16"].pop("ids")
    return {"shape": SHAPES[name][2], "convert_s": round(convert_s, 1), "ours": sides["ours"],
            "theirs_hf_generate": sides["theirs"], "same_ids": same, "ours_float16": sides["ours_float16"],
            "float16_same_ids": half_ids == theirs,
            "theirs_over_ours_ms_per_token": round(
                sides["theirs"]["ms_per_token"] / sides["ours"]["ms_per_token"], 2),
            "theirs_over_ours_float16_ms_per_token": round(
                sides["theirs"]["ms_per_token"] / sides["ours_float16"]["ms_per_token"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", choices=sorted(SHAPES), default=sorted(SHAPES),
                        help="the shapes to measure (default: all)")
    parser.add_argument("--sentences", type=int, default=3,
                        help=f"how many of the built-in sentences (1-{len(SENTENCES)})")
    parser.add_argument("--rounds", type=int, default=2, help="timed rounds over the sentences (1-100)")
    parser.add_argument("--tokens", type=int, default=24, help="tokens each sentence decodes (1-500)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per side (1-64)")
    # a child process's side
    parser.add_argument("--side", choices=("ours", "theirs", "ours_float16"), help=argparse.SUPPRESS)
    parser.add_argument("--folders", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--forced", default="[]", help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name, low, high in (("sentences", 1, len(SENTENCES)), ("rounds", 1, 100), ("tokens", 1, 500),
                            ("threads", 1, 64)):
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name} must be in [{low}, {high}], got {getattr(args, name)}")
    sentences = SENTENCES[: args.sentences]
    if args.side:
        hf_folder, converted = map(Path, args.folders)
        print(json.dumps(run_side(args.side, hf_folder, converted, sentences, args.rounds, args.tokens, args.threads,
                                  json.loads(args.forced))))
        return

    import torch
    import transformers

    results = {name: bench_family(name, args) for name in args.families}
    print(json.dumps({
        "benchmark": "bench/bench_families.py", "sentences": len(sentences), "rounds": args.rounds,
        "tokens_per_sentence": args.tokens, "threads": args.threads, "families": results,
        "torch": torch.__version__, "transformers": transformers.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.platform()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }, indent=2))


if __name__ == "__main__":
    main()
