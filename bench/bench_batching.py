"""Requests decoded together (explorer/batching.py): milliseconds per sentence for N distinct sentences sent one at a
time, against the same N sent at once from N threads through `ModelService.run`, whose batcher decodes the ones that
wait together. Greedy and beam (with the checkpoint's recorded settings), in the same run; in the server's process, on
one torch thread as the server decodes, every attention map captured, the result cache off.

    python bench/bench_batching.py [--sentences 32] [--max-lines 32] [--checkpoint checkpoints/en-de]
                                   [--analyses none|trace|all] [--one-at-a-time]

`--analyses`: what each request computes besides decoding: none (/translate), trace (ALTI+ and the norms, the page's
first screen) or all (every cheap analysis). Each row gives `alone_ms` and `batched_ms` (wall milliseconds per
sentence, the median of `--repeats` rounds), their ratio, and the batch sizes the batcher formed in the last round.
`--one-at-a-time` adds a row per strategy, "<strategy> one at a time", with every analysis run one translation at a
time (its batch form set aside, as for a plug-in without one), its rounds interleaved with the other row's.
Prints JSON.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the checkout being timed
sys.path.insert(1, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from bench_request import cpu_name  # noqa: E402
from load_test import request_plan  # noqa: E402

ANALYSES = ("none", "trace", "all")


def alone_ms(service, requests, analyses) -> float:
    started = time.perf_counter()
    for request in requests:
        service.run(request, analyses)
    return (time.perf_counter() - started) * 1000 / len(requests)


def together_ms(service, requests, analyses) -> float:
    """Every request from its own thread, released at once."""
    go = threading.Barrier(len(requests) + 1)

    def ask(request):
        go.wait()
        service.run(request, analyses)

    threads = [threading.Thread(target=ask, args=(request,)) for request in requests]
    for thread in threads:
        thread.start()
    go.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return (time.perf_counter() - started) * 1000 / len(requests)


def counted(decode, sizes: list):
    """`decode` (ModelService.run_batch), noting each batch's size in `sizes`."""

    def decode_counted(requests, analyses):
        sizes.append(len(requests))
        return decode(requests, analyses)

    return decode_counted


@contextlib.contextmanager
def batch_forms(kept: bool):
    """The registered analyses with their batch forms, or (kept=False) without them: each analysis then runs one
    translation at a time (transformer/analysis/registry.py `add_analyses_batch`)."""
    from transformer.analysis.registry import ANALYSES

    saved = dict(ANALYSES)
    if not kept:
        ANALYSES.update({name: dataclasses.replace(analysis, compute_batch=None) for name, analysis in saved.items()})
    try:
        yield
    finally:
        ANALYSES.update(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=32, help="distinct sentences per round (default 32)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per row; the median is reported (default 3)")
    parser.add_argument("--checkpoint", default="checkpoints/en-de", help="the checkpoint folder (default en-de)")
    parser.add_argument("--max-lines", type=int, default=None,
                        help="lines per batch at most (default: batching.MAX_LINES)")
    parser.add_argument("--analyses", choices=ANALYSES, default="none",
                        help="what each request computes besides decoding (default none)")
    parser.add_argument("--one-at-a-time", action="store_true",
                        help="also time each strategy with the analyses run one translation at a time (rows "
                             "'<strategy> one at a time'), interleaved with the batched analyses' rounds")
    args = parser.parse_args()
    if args.sentences < 1 or args.repeats < 1 or (args.max_lines is not None and args.max_lines < 1):
        parser.error(f"--sentences, --repeats and --max-lines must be at least 1, got {args.sentences}, "
                     f"{args.repeats} and {args.max_lines}")
    checkpoint = Path(args.checkpoint)
    if not (checkpoint / "config.json").is_file():
        parser.error(f"--checkpoint {checkpoint}: no checkpoint there")
    torch.set_num_threads(1)  # as the server decodes (explorer/run_pool.py)

    from explorer.registry import discover
    from explorer.request import Request
    from explorer.result_cache import ResultCache
    from explorer.session import ALTI, EVERY_ANALYSIS, NORMS, ModelService
    from transformer.core.half_linear import KERNEL

    KERNEL.wait(timeout=600)  # decoding on the server's path: the float16 kernel built (or known unavailable)
    analyses = {"none": frozenset(), "trace": frozenset({ALTI, NORMS}), "all": EVERY_ANALYSIS}[args.analyses]
    with tempfile.TemporaryDirectory() as nothing:
        registry = discover(Path(nothing), [checkpoint])
    key = next(iter(registry.models))
    service = ModelService(registry, ResultCache(0), bound_s=float("inf"))
    if args.max_lines is not None:
        service.batcher.max_lines = args.max_lines
    texts = [text for text, _ in request_plan(args.sentences * (args.repeats + 1), 0, "distinct")]
    modes = {"": True, " one at a time": False} if args.one_at_a_time else {"": True}  # row suffix -> batch forms
    rows = {}
    for strategy in ("greedy", "beam"):
        requests = [Request.from_api(registry, text, key, "cpu", strategy) for text in texts]
        warm = requests[: args.sentences]
        for kept in modes.values():
            with batch_forms(kept):
                alone_ms(service, warm[:4], analyses)
                together_ms(service, warm, analyses)
        alone, together, sizes = ({mode: [] for mode in modes} for _ in range(3))
        for round_ in range(1, args.repeats + 1):
            chosen = requests[round_ * args.sentences:(round_ + 1) * args.sentences]
            for mode, kept in modes.items():
                with batch_forms(kept):
                    alone[mode].append(alone_ms(service, chosen, analyses))
                    sizes[mode] = []
                    service.batcher.decode = counted(service.run_batch, sizes[mode])
                    together[mode].append(together_ms(service, chosen, analyses))
                    service.batcher.decode = service.run_batch
        for mode in modes:
            rows[strategy + mode] = {
                "settings": requests[0].settings, "alone_ms": round(statistics.median(alone[mode]), 2),
                "batched_ms": round(statistics.median(together[mode]), 2),
                "alone_over_batched": round(statistics.median(alone[mode]) / statistics.median(together[mode]), 2),
                "batch_sizes": sizes[mode]}
    print(json.dumps({"checkout": os.getcwd(), "checkpoint": str(checkpoint), "sentences": args.sentences,
                      "max_lines": service.batcher.max_lines, "repeats": args.repeats, "analyses": args.analyses,
                      "cpu": cpu_name(), "cores": os.cpu_count(), "kernel": KERNEL.status, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
