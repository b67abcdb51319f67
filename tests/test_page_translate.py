"""The page's Translate (explorer/page_translate.py): a browser-only event whose body for the JSON route reads the
page as Request.from_page does (checked by running static/translate_request.js under Node), and an adoption, without
the queue, that takes the route's result by its key and neither builds a request nor runs the model."""
import json
import shutil
import subprocess

import pytest

from explorer.page_translate import body_names
from explorer.registry import discover
from explorer.request import Request
from explorer.shell import build_demo

from .conftest import ROOT

SENTENCE = "A dog runs."
NODE = shutil.which("node")
SCRIPT = ROOT / "explorer" / "static" / "translate_request.js"


@pytest.fixture(scope="module")
def page():
    demo, ui = build_demo(discover(ROOT / "checkpoints"))
    return demo, ui


def events_of(demo, component, event):
    return [fn for fn in demo.fns.values() if (component._id, event) in fn.targets]


def test_translate_is_a_browser_event_and_its_followers_skip_the_queue(page):
    demo, ui = page
    c = ui.components
    for component, event in ((c["translate_button"], "click"), (c["source"], "submit")):
        (translate,) = events_of(demo, component, event)
        assert translate.fn is None and "translatePage(" in translate.js  # nothing sent to the server's events
        assert translate.inputs == [c[name] for name in ui.request_names] + [c["live_attention"]]
        assert translate.outputs == [c["translation"], c["summary"], c["live_attention"], c["result_key"],
                                     c["translate_error"]]
    (adopt,) = events_of(demo, c["result_key"], "change")
    (draw,) = [fn for fn in demo.fns.values() if fn.trigger_after == adopt._id]
    assert adopt.queue is False and draw.queue is False and draw.trigger_only_on_success


def body_from_browser(names, values) -> dict:
    """What translate_request.js's requestBody makes of the page's values, run under Node."""
    program = (f"const {{requestBody}} = require({json.dumps(str(SCRIPT))});"
               "const [names, values] = JSON.parse(process.argv[1]);"
               "process.stdout.write(JSON.stringify(requestBody(names, values)));")
    done = subprocess.run([NODE, "-e", program, json.dumps([names, values])], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(NODE is None, reason="node missing (scripts/test.sh installs it)")
@pytest.mark.parametrize("strategy, changed", [
    ("beam", {"beam.beam_size": 3, "beam.length_penalty": 1.5, "sample.temperature": 2.0}),
    ("sample", {"sample.temperature": 0.7, "sample.seed": 5, "beam.beam_size": 8}),
    ("greedy", {"beam.beam_size": 2, "max_length": 12, "prefix": "Ein", "heads_off": "cross 1 2"}),
])
def test_the_routes_body_is_the_request_the_page_describes(page, strategy, changed):
    """The browser's body, given to the route's constructor (Request.from_api), is the request Request.from_page
    builds from the same controls: only the chosen strategy's settings, by their own names."""
    _, ui = page
    values = {name: ui.components[name].value for name in ui.request_names} | {
        "source": SENTENCE, "strategy": strategy, **changed}
    body = body_from_browser(body_names(ui), [values[name] for name in ui.request_names])
    assert not any("." in name for name in body["settings"])  # the settings' own names, not the page's keys
    assert Request.from_api(ui.registry, **body) == Request.from_page(ui.registry, values)


def test_the_adoption_takes_the_routes_result_without_running_anything(page, monkeypatch):
    demo, ui = page
    c = ui.components
    result = ui.service.run(Request.from_api(ui.registry, f"{SENTENCE}\nTwo cats sleep."))
    key = ui.hand_out(result)
    (adopt,) = events_of(demo, c["result_key"], "change")
    monkeypatch.setattr(Request, "build", classmethod(lambda *a, **k: pytest.fail("the adoption built a request")))
    monkeypatch.setattr(ui.service, "run", lambda *a, **k: pytest.fail("the adoption ran the model"))
    state = [c[name].value for name in ui.state_names]
    updates = adopt.fn(key, *state)
    assert updates[ui.result_state] is result and "live" in result.rendered_views
    sentences = updates[c["sentence"]]
    assert sentences["value"] == 0 and [label for label, _ in sentences["choices"]] == [
        f"{i + 1}: {t.text[:60]}" for i, t in enumerate(result.translations)]
    assert updates[c["language_offer"]]["visible"] is False  # English into English -> German: nothing offered
    assert c["translation"] not in updates and c["live_attention"] not in updates  # the browser set them
    assert adopt.fn("no-such-key", *state) == {ui.result_state: None}
