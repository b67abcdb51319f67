"""The walk-through's speed and size, printed as JSON, for a 20-piece sentence (19 words and </s>) in headless Debian
Chromium against the app:

- payload_kb: what the page receives for one walk (views/walkthrough_payload.py, as JSON), the largest over every
  source piece at step 1 and every step at piece 1; api_kb: the same walk at full precision, as /walkthrough sends it.
- walk_server_ms: the teacher-forced pass and the stages (ModelService.walkthrough), median; translate_ms: the
  translation itself on the same server, for comparison.
- first_stage_ms: from the click on "How it computed this" to the frame painted with the walk's first stage (in the
  page: the click event to two animation frames after the stage is there), median of --runs; it includes the server's
  walk and the transfer; first_stage_draw_ms: of which the browser's drawing of the walk (walk_render.js).
- stage_switch_ms: Next, from the click to the painted frame (two animation frames, 33 ms at 60 Hz, are the floor),
  over every stage of the walk, --runs times: the median, the 90th percentile, the slowest single switch, and the
  stage whose median is the highest;
  live_switch_ms: the live view's kind switch on the same page, for comparison.
- layer_head_switch_ms: the walk's own Layer or Head picker changed on the cross-attention softmax stage (drawn in
  the browser from the payload), change event to the painted frame, median and slowest; slider_ms: the output
  stage's temperature slider moved (softmax, top-k and top-p over the whole vocabulary recomputed), input event to
  the painted frame, median and slowest.

    python bench/bench_walkthrough.py [--runs 7]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_app import CHROMIUM_ARGS, SWITCH_JS  # noqa: E402  (bench/, beside this script)

SENTENCE_20 = "A young woman in a red dress and a small boy are walking along the sandy beach."
OTHER = "Two dogs are running through the snow."

ARM_OPEN_JS = """() => {
  const root = () => document.querySelector('#walkthrough .wk-walk');
  if (root()) root().dataset.stage = 'old';
  window.aeWalkOpened = null;
  document.querySelector('#walk-open').addEventListener('click', () => {
    const started = performance.now();
    const check = () => {
      const r = root();
      if (r && r.dataset.stage === '1' && r.querySelector('.wk-stage')) {
        const done = () => { window.aeWalkOpened = performance.now() - started; };
        requestAnimationFrame(() => requestAnimationFrame(done));
      } else requestAnimationFrame(check);
    };
    requestAnimationFrame(check);
  }, {capture: true, once: true});
}"""

# every stage in turn: Next clicked, timed until the browser has painted it (two frames)
NEXT_JS = """async () => {
  const times = [], root = document.querySelector('#walkthrough .wk-walk');
  while (true) {
    const next = root.querySelector('.wk-next');
    if (!next || next.disabled) break;
    const started = performance.now();
    next.click();
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    times.push(performance.now() - started);
  }
  return times;
}"""


# a picker or a slider changed, timed until the browser has painted it (two frames)
PICK_JS = """async ([selector, values, event]) => {
  const times = [], root = document.querySelector('#walkthrough .wk-walk');
  for (const value of values) {
    const control = root.querySelector(selector);
    const started = performance.now();
    control.value = value;
    control.dispatchEvent(new Event(event, {bubbles: true}));
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    times.push(performance.now() - started);
  }
  return times;
}"""


def open_stage(page, numbers, key: str) -> None:
    for number in numbers:
        page.locator("#walkthrough select.wk-list").select_option(number)
        if page.locator("#walkthrough .wk-stage").get_attribute("data-key") == key:
            return
    raise ValueError(f"no stage {key}")


def pickers(page, runs: int) -> dict:
    """The walk's Layer and Head pickers on the cross-attention softmax stage, and the output's temperature slider."""
    numbers = page.evaluate(
        "() => [...document.querySelectorAll('#walkthrough select.wk-list option')].map(o => o.value)")
    layer_head = []
    open_stage(page, numbers, "decoder.cross.softmax")
    for _ in range(runs):
        layer_head += page.evaluate(PICK_JS, ["select.wk-layer", ["2", "3", "4", "1"], "change"])
        layer_head += page.evaluate(PICK_JS, ["select.wk-head", ["2", "3", "4", "1"], "change"])
    open_stage(page, numbers, "output.softmax")
    slider = []
    for _ in range(runs):
        slider += page.evaluate(PICK_JS, ["input.wk-temperature", ["0.5", "1.5", "2.5", "1"], "input"])
    return {"layer_head_switch_ms": round(statistics.median(layer_head), 1),
            "layer_head_switch_ms_slowest": round(max(layer_head), 1),
            "slider_ms": round(statistics.median(slider), 1), "slider_ms_slowest": round(max(slider), 1)}


def sizes(ui) -> dict:
    from explorer.request import Request
    from explorer.views.walkthrough_payload import walk_json, walk_payload

    started = time.perf_counter()
    result = ui.service.run(Request.from_api(ui.registry, SENTENCE_20))
    translate_ms = (time.perf_counter() - started) * 1000
    translation = result.translations[0]
    pairs = [(token, 0) for token in range(len(translation.src_ids))] + \
            [(0, step) for step in range(1, len(translation.tgt_ids))]
    payload, api, server = [], [], []
    for token, step in pairs:
        started = time.perf_counter()
        walk = ui.service.walkthrough(result, translation, token, step)
        server.append((time.perf_counter() - started) * 1000)
        payload.append(len(json.dumps(walk_payload(walk), ensure_ascii=False, separators=(",", ":")).encode()) / 1024)
        api.append(len(json.dumps(walk_json(walk), ensure_ascii=False).encode()) / 1024)
    return {"source_pieces": len(translation.src_ids), "output_pieces": len(translation.tgt_ids),
            "stages": len(walk.stages), "payload_kb": round(max(payload), 1),
            "payload_kb_median": round(statistics.median(payload), 1), "api_kb": round(max(api), 1),
            "walk_server_ms": round(statistics.median(server), 1), "translate_ms": round(translate_ms, 1),
            "walks_measured": len(pairs)}


def browser(url: str, runs: int) -> dict:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = chromium.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url)
        expect(page.locator("#footer")).to_contain_text("decoding", timeout=60_000)
        opened, drawn = [], []
        for run in range(runs + 1):  # the first warms up; not counted
            # as a visitor does: translate, then open the walk (another sentence first, so the walk is a new one)
            for sentence in (OTHER, SENTENCE_20):
                before = page.locator("#translation textarea").input_value()
                page.get_by_label("Source text").fill(sentence)
                page.get_by_role("button", name="Translate").click()
                page.wait_for_function("([text]) => document.querySelector('#translation textarea').value !== text",
                                       arg=[before], timeout=60_000)
            page.wait_for_timeout(600)  # the page at rest: the open tab drawn
            page.evaluate(ARM_OPEN_JS)
            page.locator("#walk-open").click()
            page.wait_for_function("() => window.aeWalkOpened !== null", timeout=60_000)
            if run:
                opened.append(page.evaluate("() => window.aeWalkOpened"))
                drawn.append(float(page.evaluate(
                    "() => document.querySelector('#walkthrough .wk-walk').dataset.drawMs")))
            page.wait_for_timeout(600)  # at rest, as a visitor reads the first stage
        by_stage = []  # by_stage[i]: the times of Next into stage i + 2
        for _ in range(runs):
            page.locator("#walkthrough select.wk-list").select_option("1")
            times = page.evaluate(NEXT_JS)
            by_stage = [previous + [t] for previous, t in zip(by_stage, times)] if by_stage else [[t] for t in times]
        switches = [t for times in by_stage for t in times]
        medians = [statistics.median(times) for times in by_stage]
        slowest = max(range(len(medians)), key=medians.__getitem__)
        picked = pickers(page, runs)
        page.evaluate("() => document.querySelector('#live-attention').scrollIntoView()")
        live = []
        while len(live) < runs:
            live += page.evaluate(SWITCH_JS, ["select.ae-kind", ["encoder_self", "decoder_self", "cross"]])
        chromium.close()
    return {"first_stage_ms": round(statistics.median(opened)), "first_stage_ms_each": [round(t) for t in opened],
            "first_stage_draw_ms": round(statistics.median(drawn), 1),
            "stage_switch_ms": round(statistics.median(switches), 1),
            "stage_switch_ms_slowest": round(max(switches), 1),
            "stage_switch_ms_p90": round(statistics.quantiles(switches, n=10)[-1], 1),
            "slowest_stage": {"number": slowest + 2, "median_ms": round(medians[slowest], 1)},
            "live_switch_ms": round(statistics.median(live), 1), "runs": runs} | picked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="medians over this many runs of each browser measure")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    import app

    _, url, _ = app.launch(quiet=True)
    report = {"workers_status": app.after_launch().wait(120)}
    try:
        report |= sizes(app.ui) | browser(url, args.runs)
    finally:
        with contextlib.redirect_stdout(sys.stderr):  # Gradio prints "Closing server..." to stdout: keep it JSON
            app.demo.close()
    report["budgets"] = {"stage_switch_ms": 50, "layer_head_switch_ms": 50, "slider_ms": 50, "payload_kb": 300,
                         "first_stage_ms": 300}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
