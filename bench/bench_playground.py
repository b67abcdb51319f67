"""The playground's figures (docs/playground.md), as JSON:

    python bench/bench_playground.py [--skip-translation]

- each timed task's run on one thread with live redraws (the probe's attention and the held-out score every 20
  updates): the step and the seconds at which its held-out exact match first reaches the target (the step is the
  same on every run on this CPU; the seconds depend on the machine's load), and the run's whole time;
- the first redraw after Train, through the Learn tab's queue with its worker started ahead (as opening the tab does),
  and the redraws per second of a run;
- opening a shipped replay and drawing its last snapshot's figures, as the Learn tab does;
- translation latency of the shipped en-de model in this process (one thread, the app's setting), with no run
  training and while one trains in its worker process: p50 and p95 of one client's requests (not the 32 clients of
  bench/load_test.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from transformer.playground import PlaygroundRun, Settings  # noqa: E402

TARGETS = {  # task -> (settings, exact match to reach, the seconds)
    "reverse": ({"layers": 2, "heads": 2, "width": 32, "steps": 400}, 0.95, 10),
    "copy": ({"layers": 1, "heads": 2, "width": 32, "steps": 600}, 0.99, 8),
    "numbers": ({"layers": 2, "heads": 2, "width": 32, "steps": 300}, 0.95, 60),
}
SENTENCES = ["A man in a blue jacket is riding a bicycle.", "Two dogs are running through the snow.",
             "A woman is reading a book in the park.", "Children play football on the beach."]


def timed_run(task: str, settings: dict, target: float) -> dict:
    run = PlaygroundRun(Settings.checked(task=task, time_cap=600, **settings))
    reached, reached_step, redraws, last = None, None, [], None
    for snapshot in run.snapshots():
        redraws.append(snapshot.seconds)
        if reached is None and snapshot.accuracy >= target:
            reached, reached_step = snapshot.seconds, snapshot.step
        last = snapshot
    gaps = [b - a for a, b in zip(redraws, redraws[1:])]
    return {"task": task, **settings, "target": target, "step_to_target": reached_step, "seconds_to_target": reached,
            "final_exact_match": last.accuracy, "seconds": round(last.seconds, 2),
            "redraws_per_second": round(1 / statistics.mean(gaps), 2) if gaps else None}


def first_redraw() -> dict:
    from explorer.training_queue import TrainingQueue

    queue = TrainingQueue(1)
    queue.warm()
    while not any(w is not None for w in queue._idle):  # noqa: SLF001  (the worker the opened tab starts)
        time.sleep(0.05)
    started = time.perf_counter()
    run = queue.train(Settings.checked(task="reverse", steps=40).to_dict())
    kind, _ = next(run)
    first = time.perf_counter() - started
    run.close()
    queue.close()
    return {"first_redraw_seconds": round(first, 3), "first_event": kind}


def replay_open() -> dict:
    from explorer.views.learn import cached_replay, open_replay, replay_values
    from transformer.playground.shipped import shipped_folder

    times = []
    for _ in range(5):
        cached_replay.cache_clear()
        started = time.perf_counter()
        replay_values(open_replay(shipped_folder("reverse")))
        times.append(time.perf_counter() - started)
    return {"replay_open_ms_median": round(1000 * statistics.median(times), 1)}


def latencies(translator, count: int) -> list[float]:
    out = []
    for i in range(count):
        started = time.perf_counter()
        translator.translate(SENTENCES[i % len(SENTENCES)], strategy="beam", capture=True)
        out.append(time.perf_counter() - started)
    return out


def translation_while_training(count: int) -> dict:
    from explorer.training_queue import TrainingQueue
    from transformer import Translator

    translator = Translator.from_pretrained("en-de")
    latencies(translator, 4)  # warm
    alone = latencies(translator, count)
    queue = TrainingQueue(1)
    run = queue.train(Settings.checked(task="reverse", steps=5000, time_cap=600).to_dict())
    next(run)
    stop = threading.Event()

    def drain():
        for _ in run:
            if stop.is_set():
                break

    threading.Thread(target=drain, daemon=True).start()
    training = latencies(translator, count)
    stop.set()
    queue.close()

    def quantiles(values):
        ordered = sorted(values)
        return {"p50_ms": round(1000 * ordered[len(ordered) // 2], 1),
                "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1)}

    return {"translation_alone": quantiles(alone), "translation_while_training": quantiles(training),
            "translations_each": count}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-translation", action="store_true", help="leave out the translation latency")
    parser.add_argument("--translations", type=int, default=40, help="requests per latency measurement")
    args = parser.parse_args()
    torch.set_num_threads(1)
    report = {"cpu": next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                           if line.startswith("model name")), "unknown"),
              "load_average_before": os.getloadavg(), "torch": torch.__version__,
              "runs": [timed_run(task, *spec[:2]) | {"issue_seconds": spec[2]} for task, spec in TARGETS.items()]}
    report |= first_redraw() | replay_open()
    if not args.skip_translation:
        report |= translation_while_training(args.translations)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
