"""Load test: many simultaneous API clients against one server, on loopback only.

    python bench/load_test.py [--clients 32] [--requests 200] [--plan mixed] [--endpoint translate_trace] [--route]
                              [--replicas 1] [--workers N]

Computes every distinct request's response alone (sequentially, on a server of its own with the result cache and
the worker processes off), then starts `python app.py` afresh, its cache empty, waits until its worker processes
are ready (explorer/run_pool.py), and sends `--requests` requests from `--clients`
threads at once, checking each response against the one it got alone: the translation and every attention
weight (a trace byte one 1/255 step apart, a weight at a step's midpoint computed in a batch, is counted apart as
`one_step_roundings`). Prints JSON: requests, concurrency, failures, mismatches, p50/p95 latency, requests/s, the
server's (its workers' included) and the clients' CPU seconds, the peak RSS of the server and of each worker.

--plan: mixed (default): greedy, beam and sampling requests on 6 sentences, 30 distinct requests in all, so the
server's result cache answers repeats; distinct: every request a sentence of its own (past the 216 sentences, a
sentence under other settings), so the cache never helps
and every request is translated; same: every client the same sentence with the model's own settings, a class
typing the sentence on the board. --result-cache N: the server's cache size (0: off; default: the app's).

--walks N: one more visitor, while the load runs, translates a sentence and opens its walk-through, N times; the
report adds the walks' p50 and p95 (the walk opened under a class's load).

--beside-training: a Learn-tab run (reverse, 5,000 updates) trains in the server's own training queue beside the
load, in the Learn tab's worker process, pausing while translations wait (bench/beside.py, bench/app_training.py);
the report gives its step before and after the load, and says whether it still trained at the
end.

--route: every client POSTs to the JSON route /api/v1/translate (explorer/http_api.py: what the page's Translate
fetches, with the same answer as translate_trace) instead of a Gradio endpoint; a 503 with Retry-After (the server
full) is counted apart as `busy`, a 503 without it as a failure.

--replicas N: N servers on their own ports, the clients sending round-robin (a tiny load balancer): what two
replicas behind a load balancer give (docs/deploy.md); --workers N sets each server's worker processes.

The first server logs every batch it decodes (ATTENTION_EXPLORER_BATCH_LOG=1): `batches` gives, per strategy, how
many, their requests, lines and seconds (p50, p95, max), and the milliseconds per line at each size.
--record-arrivals FILE writes when each request was sent (seconds from the first) and its lines, as JSON: the
arrival pattern tests/test_batch_admission.py replays.

--endpoint: translate_trace (default) is what a class pressing Translate gets: the translation and the
compact trace the live view draws (every kind, layer and head, norms and ALTI+); translate_details is every
number at full precision; translate is the text alone.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from beside import training_server_script, wait_for_training  # bench/, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from explorer.batch_costs import parse_line  # noqa: E402  (the repository's root on the path first)

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


def start_server(timeout_s: float = 90, result_cache: int | None = None, workers: int | None = None,
                 script: list[str] | None = None, log_file=None) -> tuple[subprocess.Popen, str]:
    """`python app.py` on a free port, once it answers HTTP and its worker processes have started (or failed to);
    with `log_file` (open for writing), its log goes there with a line per batch (ATTENTION_EXPLORER_BATCH_LOG)."""
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)}
    if log_file is not None:
        env["ATTENTION_EXPLORER_BATCH_LOG"] = "1"
    if result_cache is not None:
        env["ATTENTION_EXPLORER_RESULT_CACHE"] = str(result_cache)
    if workers is not None:
        env["ATTENTION_EXPLORER_WORKERS"] = str(workers)
    # a session of its own: stop_server ends its worker processes with it
    process = subprocess.Popen(
        [sys.executable, *(script or ["app.py"])],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL if log_file is None else log_file,
    )
    url, started = f"http://127.0.0.1:{port}/", time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        try:
            urllib.request.urlopen(url, timeout=1)
            wait_for_workers(url, started + timeout_s)
            return process, url
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"app.py exited with code {process.returncode}")
            time.sleep(0.2)
    stop_server(process)
    raise RuntimeError("app.py did not start serving in time")


def stop_server(process: subprocess.Popen) -> None:
    """Ends `python app.py` started by start_server and its worker processes (its process group) at once: a worker
    still loading the models would otherwise run on for a second and share the cores with what is measured next."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    process.wait()


def wait_for_workers(url: str, deadline: float) -> dict:
    """The server's /server_status once its worker processes are ready, off or unavailable, and its float16 kernel
    loaded (or unavailable): a class uses a server that started minutes ago. A request answered while the kernel
    still loads decodes through F.linear, which agrees with the kernel to float32 rounding, not to the bit: the
    pass alone once began before it, and its first answers differed from the load's in a trace's last 1/255."""
    client = HttpClient(url)
    while True:
        status = client.call("/server_status")
        settled = status["workers_status"] not in ("starting", "not started") and status["kernel"] != "building"
        if settled or time.perf_counter() > deadline:
            return status
        time.sleep(0.2)


def server_processes(pid: int) -> list[int]:
    """The server and its worker processes (its children)."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    return [pid] + children


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def cpu_seconds(pid: int | None = None) -> float:
    """CPU time (user + system) a process has used: the server's by pid, or this one's (the clients)."""
    if pid is None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# distinct sentences: every subject with every action and place, 6 x 6 x 6 of them
SUBJECTS = ["A man", "Two dogs", "A young woman", "The children", "An old chef", "My brother"]
ACTIONS = ["is walking", "are playing", "is reading a book", "are sitting", "is waiting", "is singing"]
PLACES = ["in the park.", "near the river.", "on the train.", "at the station.", "in the kitchen.", "by the sea."]
BOARD_SENTENCE = "Where is the train station?"
PLANS = ("mixed", "distinct", "same")


def request_plan(total: int, seed: int = 0, plan: str = "mixed") -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    if plan == "same":
        return [(BOARD_SENTENCE, {})] * total
    if plan == "distinct":
        sentences = [f"{s} {a} {p}" for s in SUBJECTS for a in ACTIONS for p in PLACES]
        if total <= len(sentences):
            return [(text, rng.choice(SETTINGS)) for text in rng.sample(sentences, total)]
        pairs = [(text, settings) for text in sentences for settings in SETTINGS]  # a sentence under other settings
        if total > len(pairs):
            raise ValueError(f"--plan distinct has {len(pairs)} distinct requests: ask for at most that many")
        return rng.sample(pairs, total)
    return [(rng.choice(SENTENCES), rng.choice(SETTINGS)) for _ in range(total)]


ENDPOINTS = ("translate_trace", "translate_details", "translate")


def fingerprint(endpoint: str, response: dict) -> str:
    """The translation and every number the endpoint returns behind the plots, as one comparable string."""
    if endpoint == "translate_details":
        return json.dumps([(s["text"], s["tgt_ids"], s["attention"]) for s in response["sentences"]], sort_keys=True)
    return json.dumps([response["translations"], response.get("traces")], sort_keys=True)


ROUTE = "/api/v1/translate"


class Busy(Exception):
    """The route's 503 with Retry-After: the server full, as it is meant to answer past its bound."""


class HttpClient:
    """Gradio's HTTP API with nothing on top, as one visitor: POST the arguments to /gradio_api/call/NAME with this
    client's own session (a browser sends one too: the server then builds its per-visitor state once, not per
    request), then read the event stream until its result. A classroom's browsers run on their own machines; here
    the clients share the server's cores, so they must cost little (gradio_client spent as much CPU as the server)."""

    def __init__(self, url: str):
        parsed = urllib.parse.urlsplit(url)
        self.connection = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=120)
        self.session = uuid.uuid4().hex
        self.parameters = {}  # per endpoint: [(name, default)] in the endpoint's order

    def request(self, method: str, path: str, body: dict | None = None) -> bytes:
        data = None if body is None else json.dumps(body).encode("utf-8")
        self.connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        payload = response.read()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status} from {path}: {payload[:200]!r}")
        return payload

    def predict(self, text: str, api_name: str, **arguments) -> dict:
        if api_name == ROUTE:
            return self.translate_route(text, **arguments)
        return self.call(api_name, text=text, **arguments)

    def translate_route(self, text: str, **arguments) -> dict:
        """POST /api/v1/translate: the answer, or Busy where the server said 503 with Retry-After."""
        body = json.dumps({"text": text, **arguments}).encode("utf-8")
        self.connection.request("POST", ROUTE, body=body, headers={"Content-Type": "application/json"})
        response = self.connection.getresponse()
        payload = response.read()
        if response.status == 503 and response.getheader("Retry-After"):
            raise Busy(response.getheader("Retry-After"))
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status} from {ROUTE}: {payload[:200]!r}")
        return json.loads(payload)

    def call(self, api_name: str, **arguments) -> dict:
        if api_name not in self.parameters:
            info = json.loads(self.request("GET", "/gradio_api/info"))["named_endpoints"][api_name]["parameters"]
            self.parameters[api_name] = [(p["parameter_name"], p.get("parameter_default")) for p in info]
        unknown = set(arguments) - {name for name, _ in self.parameters[api_name]}
        if unknown:
            raise ValueError(f"{api_name} has no parameter {sorted(unknown)}")
        data = [arguments.get(name, default) for name, default in self.parameters[api_name]]
        name = api_name.strip("/")
        event = json.loads(
            self.request("POST", f"/gradio_api/call/{name}", {"data": data, "session_hash": self.session})
        )
        stream = self.request("GET", f"/gradio_api/call/{name}/{event['event_id']}").decode("utf-8")
        kind = None
        for line in stream.splitlines():
            if line.startswith("event: "):
                kind = line[len("event: "):]
            elif line.startswith("data: ") and kind in ("complete", "error"):
                result = json.loads(line[len("data: "):])
                if kind == "error":
                    raise RuntimeError(f"the server answered with an error: {result}")
                return result[0]
        raise RuntimeError(f"no result in the event stream of {api_name}")


def responses_alone(url: str, plan: list[tuple[str, dict]], endpoint: str) -> dict[str, dict]:
    """Every distinct request's response, one at a time: what each must equal under load."""
    distinct = {json.dumps([text, settings], sort_keys=True): (text, settings) for text, settings in plan}
    single = HttpClient(url)
    api_name = endpoint if endpoint == ROUTE else "/" + endpoint
    return {key: single.predict(text, **settings, api_name=api_name) for key, (text, settings) in distinct.items()}


def difference(endpoint: str, alone: dict, loaded: dict) -> dict:
    """How a response under load differs from the same request's alone: whether any translation differs, and the
    largest difference of one number (a trace's bytes: in 1/255 steps; full precision: absolute)."""
    if endpoint == "translate_details":
        texts = ([s["text"] for s in alone["sentences"]], [s["text"] for s in loaded["sentences"]])
        flat = [np.concatenate([np.ravel(np.asarray(v, dtype=float)) for s in r["sentences"]
                                for v in s["attention"].values()]) for r in (alone, loaded)]
    else:
        texts = (alone["translations"], loaded["translations"])
        flat = [np.concatenate([unpacked(trace) for trace in r.get("traces") or []] or [np.zeros(0)])
                for r in (alone, loaded)]
    largest = float(np.abs(flat[0] - flat[1]).max()) if flat[0].shape == flat[1].shape and flat[0].size else None
    return {"translation_differs": texts[0] != texts[1], "largest_number_difference": largest}


def within_one_step(endpoint: str, differs: dict) -> bool:
    """The same translation with one trace byte or more one 1/255 step apart, and none further: a request decoded in
    a batch equals itself alone within float32 rounding (explorer/batching.py, tests/test_batching.py: 1e-5), and a
    weight that lies at a step's midpoint can round to either side of it. Counted apart from the mismatches."""
    return (endpoint != "translate_details" and not differs["translation_differs"]
            and differs["largest_number_difference"] is not None and differs["largest_number_difference"] <= 1)


def unpacked(trace: dict) -> np.ndarray:
    """A trace's attention bytes (live_payload.packed), every kind in order, as 0-255 integers."""
    return np.concatenate([np.frombuffer(zlib.decompress(base64.b64decode(kind["q"])), dtype=np.uint8).astype(int)
                           for _, kind in sorted(trace["kinds"].items())])


def walks_under_load(url: str, plan: list[tuple[str, dict]], walks: int, running: threading.Event) -> list[float]:
    """One more visitor while the load runs: translates a sentence of the plan, then opens its walk-through
    (/walkthrough, piece 1, step 1, its translation then answered from the result cache as the page's is from its
    result), `walks` times or until the load ends; the walks' latencies in ms."""
    client, latencies = HttpClient(url), []
    for text, settings in plan[:walks]:
        if not running.is_set():
            break
        client.predict(text, **settings, api_name="/translate_trace")
        started = time.perf_counter()
        client.call("/walkthrough", text=text, **settings)
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def percentile_95(ordered: list[float]):
    return round(ordered[max(0, int(0.95 * len(ordered)) - 1)]) if ordered else None


def run_load_test(url, clients: int, plan: list[tuple[str, dict]], max_seconds: float, alone: dict[str, str],
                  endpoint: str = "translate_trace", server_pid=None, walks: int = 0) -> dict:
    """`url` and `server_pid`: one server's, or lists of several replicas' (requests then go round-robin, as a load
    balancer in front of them would send them)."""
    urls = url if isinstance(url, list) else [url]
    pids = server_pid if isinstance(server_pid, list) else [server_pid] if server_pid else []
    url, turn = urls[0], iter(range(len(plan) * 2))
    api_name = endpoint if endpoint == ROUTE else "/" + endpoint
    local = threading.local()
    deadline = time.perf_counter() + max_seconds
    latencies, failures, mismatches, skipped, busy, rounded = [], [], [], 0, [], []
    arrivals = []  # (seconds from the start, lines) of every request sent
    lock = threading.Lock()

    def send(item):
        nonlocal skipped
        if time.perf_counter() > deadline:
            with lock:
                skipped += 1
            return
        if not hasattr(local, "clients"):
            local.clients = [HttpClient(replica) for replica in urls]
        with lock:
            local.client = local.clients[next(turn) % len(urls)]
        text, settings = item
        started = time.perf_counter()
        with lock:
            arrivals.append((round(started - began, 4), text.count("\n") + 1))
        try:
            response = local.client.predict(text, **settings, api_name=api_name)
        except Busy:
            with lock:
                busy.append((time.perf_counter() - started) * 1000)
            return
        except Exception as error:  # noqa: BLE001  (every failure is counted and reported)
            with lock:
                failures.append(f"{type(error).__name__}: {error}")
            return
        elapsed = (time.perf_counter() - started) * 1000
        expected = alone[json.dumps([text, settings], sort_keys=True)]
        same = fingerprint(endpoint, response) == fingerprint(endpoint, expected)
        differs = None if same else difference(endpoint, expected, response)
        with lock:
            latencies.append(elapsed)
            if differs is not None and within_one_step(endpoint, differs):
                rounded.append({"text": text, **settings, **differs})
            elif differs is not None:
                mismatches.append({"text": text, **settings, **differs})

    began = started = time.perf_counter()
    processes = [p for pid in pids for p in server_processes(pid)]  # the servers and their workers
    server_cpu, client_cpu = sum(map(cpu_seconds, processes)), cpu_seconds()
    running, walked = threading.Event(), []
    running.set()
    walker = threading.Thread(target=lambda: walked.extend(walks_under_load(url, plan[::-1], walks, running)))
    if walks:
        walker.start()
    with ThreadPoolExecutor(max_workers=clients) as pool:
        list(pool.map(send, plan))
    wall = time.perf_counter() - started
    running.clear()
    if walks:
        walker.join()
    # where the 2 cores went while the clients were at it: the server's and the clients' (this process) CPU time
    server_cpu = round(sum(map(cpu_seconds, processes)) - server_cpu, 1) if server_pid else None
    client_cpu = round(cpu_seconds() - client_cpu, 1)
    ordered = sorted(latencies)
    return {
        "endpoint": endpoint,
        "requests": len(plan),
        "completed": len(latencies),
        "skipped_by_time_limit": skipped,
        "concurrency": clients,
        "distinct_requests": len(alone),
        "failures": len(failures),
        "busy_503": len(busy),
        "busy_p95_ms": percentile_95(sorted(busy)),
        "failure_examples": failures[:3],
        "mismatches": len(mismatches),
        "one_step_roundings": len(rounded),
        "mismatch_examples": mismatches[:5],
        "p50_ms": round(statistics.median(ordered)) if ordered else None,
        "p95_ms": percentile_95(ordered),
        "wall_s": round(wall, 1),
        "server_cpu_s": server_cpu,
        "client_cpu_s": client_cpu,
        "server_cpu_ms_per_request": round(1000 * server_cpu / len(latencies), 1) if server_pid and latencies else None,
        "requests_per_s": round(len(latencies) / wall, 2) if wall else None,
        **({"walks": len(walked), "walk_p50_ms": round(statistics.median(walked)) if walked else None,
            "walk_p95_ms": percentile_95(sorted(walked))} if walks else {}),
        "arrivals": sorted(arrivals),
    }


def quantiles(values: list[float], digits: int = 1) -> dict:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), digits),
            "p95": round(ordered[max(0, int(0.95 * len(ordered)) - 1)], digits), "max": round(ordered[-1], digits)}


def batch_distribution(log_text: str) -> dict:
    """Per strategy, the batches the server logged: how many, their requests, lines and milliseconds (p50, p95,
    max), and the median milliseconds per line at each number of lines."""
    records = [record for record in map(parse_line, log_text.splitlines()) if record is not None]
    report = {}
    for strategy in sorted({record.strategy for record in records}):
        mine = [record for record in records if record.strategy == strategy]
        sizes = sorted({record.lines for record in mine})
        report[strategy] = {
            "batches": len(mine),
            "requests": quantiles([record.requests for record in mine], 0),
            "lines": quantiles([record.lines for record in mine], 0),
            "ms": quantiles([1000 * record.seconds for record in mine]),
            "ms_per_line_by_lines": {size: round(statistics.median(
                1000 * record.seconds / size for record in mine if record.lines == size), 1) for size in sizes},
        }
    return report


def at_least(minimum: int):
    """An argparse type: a whole number of at least `minimum`."""
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    parse.__name__ = "whole number"  # argparse names it in its message: "invalid whole number value: 'x'"
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=at_least(1), default=32, help="simultaneous clients (default: 32)")
    parser.add_argument("--requests", type=at_least(1), default=200, help="requests in all (default: 200)")
    parser.add_argument("--plan", choices=PLANS, default="mixed", help="which requests (default: mixed; see above)")
    parser.add_argument("--endpoint", choices=ENDPOINTS, default="translate_trace",
                        help="the API endpoint every client calls (default: translate_trace, what the page gets)")
    parser.add_argument("--route", action="store_true",
                        help=f"POST to the JSON route {ROUTE} (one POST, no queue), not --endpoint")
    parser.add_argument("--replicas", type=at_least(1), default=1,
                        help="serve with this many `python app.py` processes on their own ports, the clients sending "
                             "round-robin as a load balancer would (default: 1)")
    parser.add_argument("--workers", type=at_least(0), default=None,
                        help="each server's worker processes, ATTENTION_EXPLORER_WORKERS (default: the app's)")
    parser.add_argument("--result-cache", type=at_least(0), default=None,
                        help="the server's result cache size, 0 for off (default: the app's)")
    parser.add_argument("--max-seconds", type=float, default=600, help="stop sending after this long")
    parser.add_argument("--walks", type=at_least(0), default=0,
                        help="one more visitor opens this many walk-throughs while the load runs, each after "
                             "translating its sentence; reports their p50 and p95 (default: 0, none)")
    parser.add_argument("--beside-training", action="store_true",
                        help="a playground run trains beside the load, as a Learn tab's custom run (default: none)")
    parser.add_argument("--record-arrivals", type=Path, default=None, metavar="FILE",
                        help="write when each request was sent and its lines to FILE, as JSON (default: not written)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.record_arrivals is not None and not args.record_arrivals.parent.is_dir():
        parser.error(f"--record-arrivals: no folder {args.record_arrivals.parent}")
    try:
        plan = request_plan(args.requests, args.seed, args.plan)
    except ValueError as error:
        parser.error(str(error))
    endpoint = ROUTE if args.route else args.endpoint
    # the responses alone, each translated in the server's own process: the load's, from worker processes, must
    # equal them
    process, url = start_server(result_cache=0, workers=0)
    try:
        alone = responses_alone(url, plan, endpoint)
    finally:
        stop_server(process)
    servers = []  # afresh: nothing cached from the pass alone
    with contextlib.ExitStack() as stack:
        batch_log = stack.enter_context(tempfile.TemporaryFile(mode="w+"))
        script, step = stack.enter_context(training_server_script()) if args.beside_training else (None, None)
        try:
            for replica in range(args.replicas):  # the run beside trains in the first server
                servers.append(start_server(result_cache=args.result_cache, workers=args.workers,
                                            script=script if replica == 0 else None,
                                            log_file=batch_log if replica == 0 else None))
            urls, pids = [url for _, url in servers], [process.pid for process, _ in servers]
            status = HttpClient(urls[0]).call("/server_status")
            step_before = wait_for_training(step) if step else None
            report = run_load_test(urls if args.replicas > 1 else urls[0], args.clients, plan, args.max_seconds,
                                   alone, endpoint, pids if args.replicas > 1 else pids[0], args.walks)
            report["training_beside"] = args.beside_training
            if step:
                step_after = step()
                report["training_step_before_after"] = [step_before, step_after]
                report["training_still_running_at_end"] = not str(step_after).startswith("ended")
            report["plan"], report["result_cache"], report["replicas"] = args.plan, args.result_cache, args.replicas
            report["workers"], report["workers_status"], report["kernel"] = (
                status["workers"], status["workers_status"], status["kernel"])
            report["server_peak_rss_mb"] = [peak_rss_mb(p) for pid in pids for p in server_processes(pid)]
        finally:
            for process, _ in servers:
                stop_server(process)
        batch_log.seek(0)
        report["batches"] = batch_distribution(batch_log.read())
    arrivals = report.pop("arrivals")
    if args.record_arrivals is not None:
        args.record_arrivals.write_text(json.dumps({"clients": args.clients, "plan": args.plan,
                                                    "arrivals": arrivals}) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
