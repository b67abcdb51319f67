"""CPU per request, in one process, one thread: what the server's work for one distinct request costs, apart from
Gradio's queue and HTTP (which bench/load_test.py adds).

    python bench/bench_request.py [--requests 60] [--checkpoint checkpoints/en-de] [--profile]

Rows (the load test's distinct plan: greedy, beam and sampling requests, every sentence new):
- `trace`: what /translate_trace computes (decoding with every attention map, ALTI+ and the norms, the compact trace);
- `page`: what the page's Translate computes and draws (the first screen: the live view and the walk's entry);
- `page_then_every_tab`: the same, then every tab drawn as if opened, each tab's analyses computed then.
Each row gives the median and mean CPU milliseconds per request (time.process_time) over `--requests` requests
after 5 unmeasured ones. `--profile` adds the top functions of the `page` row by cumulative time (cProfile).

Run it from another checkout's root (`cd OTHER && python /path/to/bench_request.py`) to time that code: it imports
the package and the explorer from the working directory. Prints JSON.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())  # the checkout being timed
sys.path.insert(1, str(Path(__file__).resolve().parent))
os.environ.setdefault("ATTENTION_EXPLORER_RESULT_CACHE", "0")  # every request computed

import torch  # noqa: E402
from load_test import request_plan  # noqa: E402


def cpu_ms(work, items) -> list[float]:
    times = []
    for item in items:
        started = time.process_time()
        work(item)
        times.append((time.process_time() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=60, help="measured requests per row (default 60)")
    parser.add_argument("--checkpoint", default="checkpoints/en-de", help="the checkpoint folder (default en-de)")
    parser.add_argument("--profile", action="store_true", help="add the page row's top functions (cProfile)")
    args = parser.parse_args()
    if args.requests < 1:
        parser.error(f"--requests must be at least 1, got {args.requests}")
    checkpoint = Path(args.checkpoint)
    if not (checkpoint / "config.json").is_file() and not any(checkpoint.glob("*.safetensors")):
        parser.error(f"--checkpoint {checkpoint}: no checkpoint there")
    torch.set_num_threads(1)  # as the server decodes (explorer/run_pool.py)

    from explorer.api_json import trace_json
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.session import ALTI, NORMS, run
    from explorer.shell import build_demo
    from explorer.views import TRANSLATION
    from transformer.core.half_linear import KERNEL

    KERNEL.wait(timeout=600)  # decoding on the server's path: the float16 kernel built (or known unavailable)
    registry = discover(checkpoint.parent)
    key = checkpoint.name
    _, ui = build_demo(registry)
    plan = request_plan(3 * (args.requests + 5), 0, "distinct")
    requests = [Request.from_api(registry, text, key, "cpu", chosen.get("strategy"), chosen.get("settings"))
                for text, chosen in plan]
    first_screen = {view.name for view in ui.views if view.placement == "first_screen"}
    tabs = [view for view in ui.views if view.placement == "tab"]

    def trace(request):
        trace_json(run(registry, request, frozenset({ALTI, NORMS})))

    def page(request):
        return ui.translate(request, only=first_screen)

    # code that computes every analysis with the translation has nothing to prepare when a tab opens
    prepared = getattr(ui, "prepared", lambda views, result: result)

    def every_tab(request):
        result = page(request)["result"]
        for view in tabs:
            if view.name not in result.rendered_views:
                view.render(prepared([view], result), ui.default_state(), ui.context(key), TRANSLATION)

    rows = {}
    for index, (name, work) in enumerate((("trace", trace), ("page", page), ("page_then_every_tab", every_tab))):
        batch = requests[index * (args.requests + 5):(index + 1) * (args.requests + 5)]
        cpu_ms(work, batch[:5])
        times = cpu_ms(work, batch[5:])
        rows[name] = {"median_ms": round(statistics.median(times), 2), "mean_ms": round(statistics.mean(times), 2)}
    out = {"checkout": os.getcwd(), "requests": args.requests, "cpu": cpu_name(), "kernel": KERNEL.status,
           "rows": rows}
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        cpu_ms(page, requests[:args.requests])
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        out["page_profile"] = text.getvalue().splitlines()
    print(json.dumps(out, indent=1))


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
