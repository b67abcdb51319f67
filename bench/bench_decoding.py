"""Decoding latency: median per-sentence milliseconds over N runs, printed as JSON.

    python bench/bench_decoding.py [--checkpoint checkpoints/en-de] [--runs 20]

Grid: greedy and beam 4 on a 15-token sentence, with and without attention capture, with and without
the key/value cache; plus greedy decoding of a 30-token output with and without the cache, on a model
of the shipped size with random weights (an untrained model does not stop early, so the output length
is fixed by max_length).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from transformer import ModelConfig, Transformer, Translator  # noqa: E402
from transformer.core.probes import ATTENTION_KINDS  # noqa: E402
from transformer.decoding.strategies.beam import beam_search  # noqa: E402
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy  # noqa: E402
from transformer.tokenizer import EOS_ID  # noqa: E402

SENTENCE = "A man in a blue jacket is riding a bicycle down the street."  # 14 pieces + EOS = 15 tokens


def median_ms(function, runs: int) -> float:
    function()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def decode(model, source_ids, strategy, capture, use_cache, max_length=None):
    probes = ATTENTION_KINDS if capture else ()
    if strategy == "beam":
        return beam_search(model, [source_ids], 4, max_length=max_length, probes=probes, use_cache=use_cache)[0]
    return decode_greedy(model, [source_ids], GreedySettings(), max_length, probes, use_cache)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default="checkpoints/en-de", help="trained model (random weights of the default size if absent)")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()

    torch.manual_seed(0)
    if (Path(args.checkpoint) / "config.json").is_file():
        translator = Translator.from_pretrained(args.checkpoint)
        model, source_ids, source = translator.model, translator.source_ids(SENTENCE)[0], args.checkpoint
    else:
        model = Transformer(ModelConfig(src_vocab_size=8000, tgt_vocab_size=8000, share_embeddings=True, tie_output=True)).eval()
        source_ids, source = torch.randint(4, 8000, (15,)).tolist() + [EOS_ID], "random weights"
    report = {"model": source, "parameters": model.num_parameters(), "source_tokens": len(source_ids) - 1,
              "torch_threads": torch.get_num_threads(), "cpu": platform.processor() or platform.machine(), "runs": args.runs,
              "median_ms": {}}
    for strategy in ("greedy", "beam"):
        for capture in (False, True):
            for use_cache in (True, False):
                name = f"{strategy}{' 4' if strategy == 'beam' else ''}, {'capture' if capture else 'no capture'}, {'cache' if use_cache else 'no cache'}"
                report["median_ms"][name] = median_ms(lambda: decode(model, source_ids, strategy, capture, use_cache), args.runs)
        report[f"{strategy}_output_tokens"] = len(decode(model, source_ids, strategy, False, True).token_ids)
    for strategy in ("greedy", "beam"):
        key = f"{strategy}{' 4' if strategy == 'beam' else ''}"
        plain, captured = report["median_ms"][f"{key}, no capture, cache"], report["median_ms"][f"{key}, capture, cache"]
        report[f"{strategy}_capture_overhead_pct"] = round(100 * (captured / plain - 1), 1)

    random_model = Transformer(model.config).eval()  # same size, random weights: never stops before max_length
    long = {use_cache: median_ms(lambda: decode(random_model, source_ids, "greedy", False, use_cache, 30), args.runs)
            for use_cache in (True, False)}
    report["greedy_30_token_output_ms"] = {"cache": long[True], "no cache": long[False],
                                           "output_tokens": len(decode(random_model, source_ids, "greedy", False, True, 30).token_ids),
                                           "speedup": round(long[False] / long[True], 2)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
