"""The walk-through in the browser on the shipped model: opened from the first screen, every stage walked with Next
at 1400 px and at 390 px, the numbers shown agreeing with /walkthrough, no request between stages; the arrow keys,
Back and the stage list; the glossary from the first screen; dark mode; and the saved HTML opened from file:// with
the network refused."""
import json
import math

import pytest
from gradio_client import Client

from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "Two dogs are running through the snow."

SHOWN_JS = """() => [...document.querySelectorAll('#walkthrough .wk-stage .wk-numbers')].map(box => ({
  name: box.dataset.name, kind: box.dataset.kind,
  values: [...box.querySelectorAll('.wk-value')].map(v => ({index: Number(v.dataset.index), text: v.textContent}))}))"""


def parse(text: str):
    text = text.replace("−", "-")
    if text == "-∞":
        return -math.inf
    if text in ("yes", "no"):
        return text == "yes"
    try:
        return float(text)
    except ValueError:
        return text


def agrees(shown, sent) -> bool:
    if sent == "-inf":
        return shown == -math.inf
    if isinstance(sent, bool) or isinstance(shown, bool):
        return shown == sent
    if isinstance(sent, (int, float)) and isinstance(shown, float):
        return abs(shown - sent) <= 5e-3 * abs(sent) + 1e-9  # 3 significant digits shown
    return str(shown) == str(sent) or shown == sent


def flat(values):
    return [v for row in values for v in row] if values and isinstance(values[0], list) else values


def watch_events(page) -> list:
    """The events the page sends from here on: a server round trip starts with one (a POST); the event stream's GET
    may still carry the answer to the event that opened the walk."""
    sent = []
    page.on("request", lambda request: sent.append(request.url) if request.method == "POST" else None)
    return sent


def stage_number(page) -> int:
    return int(page.evaluate("() => document.querySelector('#walkthrough .wk-walk').dataset.stage"))


def opened_walk(browser, url, width, height=900, **options):  # noqa: F811
    page = open_translated(browser, url, SENTENCE, width, height, **options)
    page.locator("#walk-open").click()
    page.locator("#walkthrough .wk-stage").wait_for(timeout=TIMEOUT)
    return page


@pytest.fixture(scope="module")
def api(server_url):  # noqa: F811
    """What /walkthrough returns for the walk the button opens: the first source piece, the first step, head 1."""
    return Client(server_url, verbose=False).predict(SENTENCE, 1, 1, 1, api_name="/walkthrough")


@pytest.mark.parametrize("width", [1400, 390])
def test_every_stage_shows_the_numbers_of_the_api(browser, server_url, api, width):  # noqa: F811
    page = opened_walk(browser, server_url, width)
    requests = watch_events(page)
    stages = api["stages"]
    for stage in stages:
        assert stage_number(page) == stage["number"]
        panel = page.locator("#walkthrough .wk-stage")
        assert panel.get_attribute("data-key") == stage["key"]
        assert panel.locator(".wk-title").inner_text() == f"{stage['number']}. {stage['title']}"
        shown = {box["name"]: box for box in page.evaluate(SHOWN_JS)}
        for numbers in stage["numbers"]:
            box = shown[numbers["name"]]
            sent = numbers["values"]
            values = [sent] if numbers["kind"] == "scalar" else flat(sent)
            for cell in box["values"]:
                sent_value = values[cell["index"]]
                assert agrees(parse(cell["text"]), sent_value), (stage["key"], numbers["name"], cell, sent_value)
            if numbers["kind"] in ("row", "tokens", "scalar"):
                assert len(box["values"]) == len(values), (stage["key"], numbers["name"])
        if stage["number"] < len(stages):
            page.locator("#walkthrough .wk-next").click()
    assert requests == [], requests  # every stage drawn from the one payload
    if width == 390:  # nothing wider than the screen but the scrolling figures
        box = page.locator("#walkthrough .wk-walk").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    page.close()


def test_keys_back_the_list_and_the_overview_move_between_stages(browser, server_url, api):  # noqa: F811
    page = opened_walk(browser, server_url, 1400)
    requests = watch_events(page)
    page.locator("#walkthrough .wk-walk").focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert stage_number(page) == 3
    page.keyboard.press("ArrowLeft")
    assert stage_number(page) == 2
    page.locator("#walkthrough .wk-back").click()
    assert stage_number(page) == 1
    target = next(s for s in api["stages"] if s["key"] == "decoder.decoder_self.scores")
    page.locator("#walkthrough select.wk-list").select_option(str(target["number"]))
    assert stage_number(page) == target["number"]
    assert "causal mask" in page.locator("#walkthrough .wk-stage").inner_text()
    # the overview: a block opens into its operations and closes again
    page.locator("#walkthrough .wk-block[data-block='cross'] .wk-block-title").click()
    operations = page.locator("#walkthrough .wk-ops[data-block='cross'] .wk-op")
    assert operations.count() == sum(1 for s in api["stages"] if s["block"] == "cross")
    assert page.locator("#walkthrough .wk-stage").get_attribute("data-key").startswith("decoder.cross.")
    page.locator("#walkthrough .wk-block[data-block='cross'] .wk-block-title").click()
    assert page.locator("#walkthrough .wk-ops").count() == 0  # closed again
    # an info mark: its title is the glossary's text, and a tap shows it
    term = page.locator("#walkthrough .wk-term").first
    from explorer.glossary import definition

    assert term.get_attribute("title") == definition(term.get_attribute("data-term"))
    term.click()
    text = definition(term.get_attribute("data-term"))
    assert page.locator("#walkthrough .wk-definition").inner_text().endswith(text)
    assert requests == [], requests
    page.close()


def test_the_pickers_open_another_piece_and_step(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    client = Client(server_url, verbose=False)
    page = opened_walk(browser, server_url, 1400)
    page.get_by_label("Decoding step (the piece it predicts)").click()
    page.locator("li[data-testid='dropdown-option']").nth(4).click()
    head = page.locator("#walkthrough .wk-head")
    expect(head).to_contain_text("step 5", timeout=TIMEOUT)
    page.get_by_label("Source piece").click()
    page.locator("li[data-testid='dropdown-option']").nth(2).click()
    expect(head).to_contain_text("source piece 3", timeout=TIMEOUT)
    sent = client.predict(SENTENCE, 3, 5, 1, api_name="/walkthrough")
    assert f"“{sent['token_piece']}” (source piece 3) · step 5, predicting “{sent['step_piece']}”" in head.inner_text()
    causal = next(s for s in sent["stages"] if s["key"] == "decoder.decoder_self.scores")
    page.locator("#walkthrough select.wk-list").select_option(str(causal["number"]))
    row = [cell for cell in page.evaluate(SHOWN_JS) if cell["name"] == "scores"][0]["values"]
    shown = [parse(cell["text"]) for cell in row]
    expected = next(n for n in causal["numbers"] if n["name"] == "scores")["values"]
    assert len(shown) == 5 and all(agrees(a, b) for a, b in zip(shown, expected))
    page.locator("#walkthrough").screenshot(path=str(SCREENSHOTS / "walkthrough.png"))
    # the head picker: the same stage for head 3 shows head 3's numbers, as the API gives them
    page.locator("#walk-head input").click()
    page.locator("li[data-testid='dropdown-option']").nth(2).click()
    expect(head).to_contain_text("head 3", timeout=TIMEOUT)
    other = client.predict(SENTENCE, 3, 5, 3, api_name="/walkthrough")
    causal = next(s for s in other["stages"] if s["key"] == "decoder.decoder_self.scores")
    page.locator("#walkthrough select.wk-list").select_option(str(causal["number"]))
    row = [cell for cell in page.evaluate(SHOWN_JS) if cell["name"] == "scores"][0]["values"]
    expected = next(n for n in causal["numbers"] if n["name"] == "scores")["values"]
    assert all(agrees(parse(cell["text"]), value) for cell, value in zip(row, expected))
    assert expected != next(n for n in next(s for s in sent["stages"] if s["key"] == causal["key"])["numbers"]
                            if n["name"] == "scores")["values"]  # head 3 is not head 1
    page.close()


def test_the_glossary_opens_from_the_first_screen(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    from explorer.glossary import GLOSSARY

    page = open_translated(browser, server_url, SENTENCE, 1400, 900)
    assert page.locator("#glossary-open").bounding_box()["y"] < 900
    # where the terms appear: an info mark with the term's text, the tab's own name unchanged
    lens = page.get_by_role("tab", name="Logit lens", exact=True)
    mark = lens.locator(".ae-info")
    expect(mark).to_have_attribute("title", "logit lens: " + GLOSSARY["logit lens"], timeout=TIMEOUT)
    mark.click()
    expect(page.locator(".ae-gloss-box")).to_contain_text(GLOSSARY["logit lens"])
    page.locator("#glossary-open").click()
    listing = page.locator("#glossary-list")
    expect(listing).to_be_visible(timeout=TIMEOUT)
    for term in ("ALTI+", "logit lens", "AOPC", "weighted norms", "rollout", "cross-attention", "length penalty"):
        assert GLOSSARY[term][:40] in listing.inner_text()
    page.close()


def test_dark_mode_reads(browser, server_url):  # noqa: F811
    page = opened_walk(browser, server_url + "?__theme=dark", 1400, color_scheme="dark")
    colour = page.evaluate("() => getComputedStyle(document.querySelector('#walkthrough .wk-title')).color")
    channels = [int(c) for c in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3]]
    assert sum(channels) / 3 > 150, colour  # light text on the dark page
    page.locator("#walkthrough").screenshot(path=str(SCREENSHOTS / "walkthrough-dark.png"))
    page.close()


def test_the_save_button_writes_the_walk_as_one_file(browser, server_url, tmp_path):  # noqa: F811
    page = opened_walk(browser, server_url, 1400)
    page.locator("#walk-save").click()
    link = page.locator("#walk-file a[download]")
    link.wait_for(timeout=TIMEOUT)
    with page.expect_download() as download:
        link.click()
    path = tmp_path / "walk.html"
    download.value.save_as(path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "function drawWalk" in text  # the code inlined, not linked
    assert "<script src" not in text and "<link" not in text and "http://" not in text.split("<script>")[0]
    assert '"step":1' in text and '"token":1' in text and "resolveRefs" in text
    page.close()


def test_the_saved_walk_opens_from_disk_with_the_network_refused(browser, tmp_path):  # noqa: F811
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.session import ModelService
    from explorer.standalone import walk_html
    from explorer.views.walkthrough_payload import walk_json, walk_payload

    from .conftest import ROOT

    registry = discover(ROOT / "checkpoints")
    service = ModelService(registry)
    result = service.run(Request.from_api(registry, SENTENCE))
    translation = result.translations[0]
    walk = service.walkthrough(result, translation, 2, 3, 1)
    payload = walk_payload(walk)
    path = tmp_path / "walk.html"
    path.write_text(walk_html(payload, {"model": "en-de", "app_version": "test"}), encoding="utf-8")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    fetched = []
    page.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else
               (fetched.append(route.request.url), route.abort()))
    page.goto(path.as_uri())
    page.locator("#walkthrough .wk-stage").wait_for(timeout=TIMEOUT)
    sent = walk_json(walk)["stages"]
    for stage in sent[:12]:
        assert stage_number(page) == stage["number"]
        assert page.locator("#walkthrough .wk-stage").get_attribute("data-key") == stage["key"]
        page.locator("#walkthrough .wk-next").click()
    page.locator("#walkthrough select.wk-list").select_option(str(len(sent)))
    assert page.locator("#walkthrough .wk-stage").get_attribute("data-key") == sent[-1]["key"]
    assert json.loads(json.dumps(payload["token_piece"])) in page.locator("#walkthrough .wk-head").inner_text()
    assert fetched == []
    page.close()
