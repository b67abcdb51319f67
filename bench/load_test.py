"""Load test: many simultaneous API clients against one server, on loopback only.

    python bench/load_test.py [--clients 16] [--requests 200] [--max-seconds 600]

Starts `python app.py` on a free loopback port, computes every distinct request's response alone
(sequentially), then sends `--requests` requests from `--clients` threads at once with mixed settings
and checks each response against the one it got alone: the translation and every attention weight.
Prints JSON: requests, concurrency, failures, mismatches, p50/p95 latency, the server's peak RSS.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = [
    "A man is riding a bicycle.", "Two dogs play in the snow.", "A woman in a red dress is dancing on the stage.",
    "Children are sitting on a bench in the park.", "A chef cooks in a busy kitchen.",
    "An old man reads a newspaper near the window.",
]
SETTINGS = [
    {"strategy": "greedy"}, {"strategy": "beam", "settings": {"beam_size": 2}},
    {"strategy": "beam", "settings": {"beam_size": 4, "length_penalty": 1.0}},
    {"strategy": "sample", "settings": {"temperature": 0.8, "top_k": 20, "seed": 3}},
    {"strategy": "sample", "settings": {"top_p": 0.9, "seed": 11}},
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(timeout_s: float = 90) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)}
    process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    url, started = f"http://127.0.0.1:{port}/", time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        try:
            urllib.request.urlopen(url, timeout=1)
            return process, url
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"app.py exited with code {process.returncode}")
            time.sleep(0.2)
    process.kill()
    raise RuntimeError("app.py did not start serving in time")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def request_plan(total: int, seed: int = 0) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    return [(rng.choice(SENTENCES), rng.choice(SETTINGS)) for _ in range(total)]


def fingerprint(details: dict) -> str:
    """The translation and every number behind the plots, as one comparable string."""
    return json.dumps([(s["text"], s["tgt_ids"], s["attention"]) for s in details["sentences"]], sort_keys=True)


def run_load_test(url: str, clients: int, plan: list[tuple[str, dict]], max_seconds: float) -> dict:
    from gradio_client import Client

    distinct = {json.dumps([text, settings], sort_keys=True): (text, settings) for text, settings in plan}
    single = Client(url, verbose=False)
    alone = {key: fingerprint(single.predict(text, **settings, api_name="/translate_details"))
             for key, (text, settings) in distinct.items()}
    local = threading.local()
    deadline = time.perf_counter() + max_seconds
    latencies, failures, mismatches, skipped = [], [], [], 0
    lock = threading.Lock()

    def send(item):
        nonlocal skipped
        if time.perf_counter() > deadline:
            with lock:
                skipped += 1
            return
        if not hasattr(local, "client"):
            local.client = Client(url, verbose=False)
        text, settings = item
        started = time.perf_counter()
        try:
            details = local.client.predict(text, **settings, api_name="/translate_details")
        except Exception as error:  # noqa: BLE001  (every failure is counted and reported)
            with lock:
                failures.append(f"{type(error).__name__}: {error}")
            return
        elapsed = (time.perf_counter() - started) * 1000
        same = fingerprint(details) == alone[json.dumps([text, settings], sort_keys=True)]
        with lock:
            latencies.append(elapsed)
            if not same:
                mismatches.append((text, settings))

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(send, plan))
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "requests": len(plan), "completed": len(latencies), "skipped_by_time_limit": skipped, "concurrency": clients,
        "distinct_requests": len(distinct), "failures": len(failures), "failure_examples": failures[:3],
        "mismatches": len(mismatches), "p50_ms": round(statistics.median(ordered)) if ordered else None,
        "p95_ms": round(ordered[max(0, int(0.95 * len(ordered)) - 1)]) if ordered else None,
        "wall_s": round(wall, 1), "requests_per_s": round(len(latencies) / wall, 2) if wall else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--max-seconds", type=float, default=600, help="stop sending after this long")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    process, url = start_server()
    try:
        report = run_load_test(url, args.clients, request_plan(args.requests, args.seed), args.max_seconds)
        report["server_peak_rss_mb"] = peak_rss_mb(process.pid)
    finally:
        process.terminate()
        process.wait()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
