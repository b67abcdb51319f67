"""Activation patching's speed on the shipped en-de model, printed as JSON (medians of --runs, after one warm-up):

    attribution_ms        attribution patching for every site: one forward and one backward pass, and the sums
    trace_ms              the exact encoder trace: layers x positions x 3 site kinds, one batched pass per kind
    trace_residual_ms     its residual-stream kind alone (one batched pass of layers x positions rows)
    heads_ms              the head matrices of all three kinds, one batched pass per kind
    path_ms               every cross-attention head's keys and values, one batched pass
    first_picture_ms      what /patch computes before it answers with the trace and the head matrices: the clean and
                          corrupted runs, trace, heads and attribution (the server's translations not included)
    trace_one_run_per_cell_ms  the residual trace again with one forward pass per cell, what batching replaces
    tab_click_ms          the Cause tab's click as the server answers it (explorer/views/cause.py's found_cause): the
                          corrupted sentence translated with the model card's decoding, the patching, both figures
                          and the text; the page built in this process, its result cache off (every click computed)

    python bench/bench_patching.py [--runs 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from transformer import Translator  # noqa: E402
from transformer.analysis.causal import Question, causal_patching  # noqa: E402
from transformer.analysis.causal.question import Runs  # noqa: E402
from transformer.analysis.causal.redecode import Cell, cell_replacements  # noqa: E402
from transformer.core.capture import record  # noqa: E402
from transformer.core.patching import patch  # noqa: E402

CLEAN = "The old man sits on the bank of the river."
CORRUPTED = "The old man sits on the bank of the city."


def one_run_per_cell(model, question: Question) -> float:
    """The residual trace with one forward pass per (layer, position): the unbatched way."""
    runs = Runs(model, question)
    names = ["encoder.output"]
    with torch.no_grad():
        with record(model, names) as clean_rec:
            runs.clean()
        with record(model, names) as corrupted_rec:
            runs.last_logits(runs.corrupted_src)
        clean, corrupted = {"encoder.output": clean_rec["encoder.output"]}, {
            "encoder.output": corrupted_rec["encoder.output"]}
        start = time.perf_counter()
        for layer in range(len(model.encoder_layers)):
            for position in range(len(question.clean_src)):
                with patch(model, cell_replacements(runs, clean, corrupted, Cell("trace", "residual", layer,
                                                                                 position))):
                    runs.last_logits(runs.corrupted_src)
    return (time.perf_counter() - start) * 1000


def tab_clicks(runs: int, target: int) -> list[float]:
    """The Cause tab's click, `runs` times after one warm-up, in milliseconds (the browser's drawing not included)."""
    os.environ["ATTENTION_EXPLORER_RESULT_CACHE"] = "0"
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.shell import build_demo
    from explorer.views.cause import found_cause

    _, ui = build_demo(discover(ROOT / "checkpoints"))
    result = ui.translate(Request.build(ui.registry, CLEAN, "en-de"), only=ui.first_screen)["result"]
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        found_cause(ui, result, 0, CORRUPTED, target + 1, None, False, None)
        times.append((time.perf_counter() - start) * 1000)
    return times[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    translator = Translator.from_pretrained("en-de")
    clean = translator.translate(CLEAN, strategy="greedy")
    src = translator.tokenizer.encode(CORRUPTED) + [translator.tokenizer.eos_id]
    target = clean.tgt_tokens.index("▁des") if "▁des" in clean.tgt_tokens else len(clean.tgt_ids) - 2
    question = Question(clean.src_ids, src, clean.tgt_ids, target)
    samples: dict[str, list[float]] = {}
    for run in range(args.runs + 1):
        result = causal_patching(translator.model, question)
        ms = result.milliseconds
        measured = {
            "attribution_ms": ms["attribution"],
            "trace_ms": sum(v for k, v in ms.items() if k.startswith("trace")),
            "trace_residual_ms": ms["trace residual"],
            "heads_ms": sum(v for k, v in ms.items() if k.startswith("heads")),
            "path_ms": sum(v for k, v in ms.items() if k.startswith("path")),
            "first_picture_ms": ms["clean and corrupted runs"] + ms["attribution"] + sum(
                v for k, v in ms.items() if k.startswith(("trace", "heads"))),
            "trace_one_run_per_cell_ms": one_run_per_cell(translator.model, question),
        }
        if run:  # the first is the warm-up
            for key, value in measured.items():
                samples.setdefault(key, []).append(value)
    samples["tab_click_ms"] = tab_clicks(args.runs, target)
    print(json.dumps({
        "model": "en-de", "threads": args.threads, "runs": args.runs,
        "source_pieces": len(clean.src_ids), "clean": CLEAN, "corrupted": CORRUPTED,
        "target_piece": target + 1, "target": clean.tgt_tokens[target],
        **{key: round(statistics.median(values), 1) for key, values in samples.items()},
    }, ensure_ascii=False, indent=2))


if __name__ == "__main__":
    main()
