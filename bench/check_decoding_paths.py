"""Whether a request's answer depends on the decoding path it met: the float16 kernel (once loaded) or float32
F.linear (while the kernel still builds or loads, or where it cannot). Translates the load test's distinct
requests (bench/load_test.py --plan distinct) in this process on one torch thread, as the server's workers do,
three times: through the kernel, through F.linear, through the kernel again; prints JSON with how many
translations and live-view traces (bytes, 1/255 steps) differ between the paths and between the two kernel runs.

    python bench/check_decoding_paths.py [--requests 200]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from load_test import request_plan, unpacked  # noqa: E402

from explorer.live_payload import live_payload  # noqa: E402
from explorer.registry import discover  # noqa: E402
from explorer.request import Request  # noqa: E402
from explorer.session import ALTI, NORMS, run  # noqa: E402
from transformer.core.half_linear import KERNEL  # noqa: E402


def answers(registry, plan) -> list[tuple[list[str], np.ndarray]]:
    out = []
    for text, settings in plan:
        request = Request.from_api(registry, text, strategy=settings.get("strategy"), settings=settings.get("settings"))
        result = run(registry, request, frozenset({ALTI, NORMS}))
        out.append(([t.text for t in result.translations],
                    np.concatenate([unpacked(live_payload(t)) for t in result.translations])))
    return out


def compared(first, second) -> dict:
    quanta = [int(np.abs(a[1] - b[1]).max()) if a[1].shape == b[1].shape else None for a, b in zip(first, second)]
    return {"translations_differ": sum(a[0] != b[0] for a, b in zip(first, second)),
            "traces_differ": sum(q != 0 for q in quanta), "largest_difference_in_255ths": max(
                (q for q in quanta if q is not None), default=0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="distinct requests (at most 216; default 200)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as app.py decodes
    if KERNEL.wait() is None:
        parser.error(f"the float16 kernel is {KERNEL.status}: nothing to compare")
    registry = discover(ROOT / "checkpoints")
    plan = request_plan(args.requests, 0, "distinct")
    kernel = answers(registry, plan)
    module, KERNEL.module = KERNEL.module, None  # as while the kernel still loads
    try:
        float32 = answers(registry, plan)
    finally:
        KERNEL.module = module
    again = answers(registry, plan)
    print(json.dumps({"requests": len(plan), "kernel_vs_f_linear": compared(kernel, float32),
                      "kernel_vs_kernel": compared(kernel, again)}, indent=2))


if __name__ == "__main__":
    main()
