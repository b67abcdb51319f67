"""App speed, printed as JSON: start-up time of `python app.py`, plot payload sizes for a 30-token
sentence, and in-browser timings (headless Debian Chromium) for a 15-token sentence.

    python bench/bench_app.py [--runs 5]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCE_15 = "A man in a blue jacket is riding a bicycle down the street."
SENTENCE_30 = ("A young woman in a long red dress and a small boy with a yellow kite are walking "
               "together along the sandy beach near the old wooden pier.")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def startup_seconds() -> float:
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)}
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - started < 60:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1)
                return round(time.perf_counter() - started, 2)
            except OSError:
                time.sleep(0.1)
        return float("nan")
    finally:
        process.terminate()
        process.wait()


def payload_kb(app) -> dict:
    """JSON size of every figure a view sends, for a 30-token sentence."""
    from explorer.views.attention import attention_figure
    from explorer.views.steps import step_outputs

    translation = app.ui.translate(SENTENCE_30, "en-de", "cpu", "beam", 4)["result"].translations[0]
    sizes = {"source_tokens": len(translation.src_tokens), "target_tokens": len(translation.tgt_tokens)}
    for kind in ("encoder_self", "decoder_self", "cross"):
        for layer, head in (("0", "mean"), ("0", "all"), ("overview", "mean")):
            figure = attention_figure(translation.recorded[kind], layer, head, False)
            sizes[f"{kind} layer={layer} head={head}"] = round(len(figure.to_json()) / 1024, 1)
    step = step_outputs(translation, 3, "0", "mean")
    sizes["step candidates"] = round(len(step["candidates_plot"].to_json()) / 1024, 1)
    sizes["step source attention"] = round(len(step["step_source_plot"].to_json()) / 1024, 1)
    return sizes


def browser_ms(url: str, runs: int) -> dict:
    from playwright.sync_api import sync_playwright

    def plot_ready(page, selector, title_part):
        page.wait_for_function(
            "([s, t]) => { const p = document.querySelector(s + ' .js-plotly-plot');"
            " return p && p.layout && p.layout.title && p.layout.title.text.includes(t) && p.querySelector('.main-svg'); }",
            arg=[selector, title_part], timeout=60_000)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        source = page.get_by_label("Source text")
        translations, changes = [], []
        for run in range(runs + 1):  # the first run also loads plotly.js; it is not counted
            source.fill(SENTENCE_15 if run % 2 == 0 else SENTENCE_15.replace("blue", "green"))
            page.evaluate("() => { const p = document.querySelector('#candidates-plot .js-plotly-plot'); if (p) p.layout.title.text = 'old'; }")
            started = time.perf_counter()
            page.get_by_role("button", name="Translate").click()
            plot_ready(page, "#candidates-plot", "Step")
            page.wait_for_function("() => document.querySelector('#translation textarea').value.length > 0")
            if run:
                translations.append((time.perf_counter() - started) * 1000)
        page.get_by_role("tab", name="Attention").click()
        plot_ready(page, "#attention-plot", "Cross")
        # Playwright's own click takes ~300 ms (it waits for the option to stop moving), so the clock starts
        # when the browser sends the change to the server, which is when the visitor's choice has registered
        sent = []
        page.on("request", lambda request: sent.append(time.perf_counter()) if request.method == "POST" else None)
        for run in range(runs):
            sent.clear()
            page.get_by_label("Head", exact=True).click()
            page.get_by_role("option", name=f"Head {run % 4 + 1}", exact=True).click()
            plot_ready(page, "#attention-plot", f"head {run % 4 + 1}")
            changes.append((time.perf_counter() - sent[0]) * 1000)
        browser.close()
    return {"translate_to_rendered_ms_median": round(statistics.median(translations)),
            "head_change_rerender_ms_median (from the change request to the drawn heatmap)": round(statistics.median(changes)),
            "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    report = {"startup_s": startup_seconds()}
    import app

    report["plot_payload_kb_30_tokens"] = payload_kb(app)
    _, url, _ = app.demo.launch(prevent_thread_lock=True, quiet=True, run_history=False, css=app.CSS)
    try:
        report["browser"] = browser_ms(url, args.runs)
    finally:
        app.demo.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
