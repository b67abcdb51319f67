"""The walk-through in the browser on the shipped model: opened from the first screen, every stage walked with Next
with the outline, the stage list and the title agreeing and the numbers those of /walkthrough, and a layer and head
changed in place on a softmax stage, each at 1400 px and at 390 px; at 1400 px, PageDown left to the page, linked
hover and the temperature slider against softmax(logits / T) from the API's logits (a phone has no keys or hover,
and the slider's layout is the walk's); the glossary from the first screen; dark mode; and, at 390 px, the saved
HTML opened from file:// with the network refused, its pickers in use."""
import math

import numpy as np
import pytest
from gradio_client import Client

from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "Two dogs are running through the snow."
WALK = "#walkthrough .wk-walk"
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
        # 3 significant digits shown (5e-3 of the value) of a float16 (2^-11 of it) of what the API sends
        return abs(shown - sent) <= (5e-3 + 2 ** -11) * abs(sent) + 1e-6
    return str(shown) == str(sent) or shown == sent


def flat(values):
    return [v for row in values for v in row] if values and isinstance(values[0], list) else values


def watch_events(page) -> list:
    """The events the page sends from here on (a server round trip starts with a POST)."""
    sent = []
    page.on("request", lambda request: sent.append(request.url) if request.method == "POST" else None)
    return sent


def walk_data(page, name: str) -> int:
    return int(page.locator(WALK).get_attribute(f"data-{name}"))


def opened_walk(browser, url, width, height=900, **options):  # noqa: F811
    page = open_translated(browser, url, SENTENCE, width, height, **options)
    page.locator("#walk-open").click()
    page.locator("#walkthrough .wk-stage").wait_for(timeout=TIMEOUT)
    return page


def version(stage, layer: int, head: int) -> dict:
    """A stage of the API's walk at `layer` and `head` (numbered from 1)."""
    if not stage["per"]:
        return stage
    return next(v for v in stage["variants"] if v["layer"] == layer and v.get("head", head) == head)


@pytest.fixture(scope="module")
def client(server_url):  # noqa: F811
    return Client(server_url, verbose=False)


def api_walk(client, token, step):
    return client.predict(SENTENCE, token, step, 1, api_name="/walkthrough")


def check_numbers(page, stage):
    shown = {box["name"]: box for box in page.evaluate(SHOWN_JS)}
    for numbers in stage["numbers"]:
        box = shown[numbers["name"]]
        values = [numbers["values"]] if numbers["kind"] == "scalar" else flat(numbers["values"])
        for cell in box["values"]:
            assert agrees(parse(cell["text"]), values[cell["index"]]), (stage["key"], numbers["name"], cell)
        if numbers["kind"] in ("row", "tokens", "scalar"):
            assert len(box["values"]) == len(values), (stage["key"], numbers["name"])


@pytest.mark.parametrize("width", [1400, 390])
def test_every_stage_in_order_with_outline_list_and_title_agreeing(browser, server_url, client, width):  # noqa: F811
    page = opened_walk(browser, server_url, width)
    assert walk_data(page, "step") >= 3  # opened on a step whose masked self-attention has at least 3 keys
    assert "keys to weigh" in page.locator("#walk-text").inner_text() or walk_data(page, "step") > 3
    sent = api_walk(client, walk_data(page, "token"), walk_data(page, "step"))
    if width == 390:  # on a phone the overview folds away, so the stage is on the first screen
        assert not page.locator("#walkthrough .wk-flow").is_visible()
        page.locator("#walkthrough .wk-fold").click()
        assert page.locator("#walkthrough .wk-flow").is_visible()
        page.locator("#walkthrough .wk-fold").click()
    requests = watch_events(page)
    for stage in sent["stages"]:
        assert walk_data(page, "stage") == stage["number"]
        panel = page.locator("#walkthrough .wk-stage")
        assert panel.get_attribute("data-key") == stage["key"]
        assert panel.locator(".wk-title").inner_text() == f"{stage['number']}. {stage['title']}"
        assert page.locator("#walkthrough select.wk-list").input_value() == str(stage["number"])  # the menu
        outline = page.locator("#walkthrough .wk-ops .wk-op.wk-on")  # the overview's outline of the open block
        assert outline.get_attribute("data-stage") == str(stage["number"])
        assert page.locator(f"#walkthrough .wk-block.wk-current[data-block='{stage['block']}']").count() == 1
        check_numbers(page, stage)
        if stage["number"] < len(sent["stages"]):
            page.locator("#walkthrough .wk-next").click()
            if width == 390 and stage["number"] >= 20:  # the sticky bar: Next stays on screen
                box = page.locator("#walkthrough .wk-next").bounding_box()
                assert 0 <= box["y"] and box["y"] + box["height"] <= 900, box
    assert requests == [], requests  # every stage drawn from the one payload
    if width == 390:  # nothing wider than the screen
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
    page.close()


@pytest.mark.parametrize("width", [1400, 390])
def test_layer_and_head_change_in_place_on_a_softmax_stage(browser, server_url, client, width):  # noqa: F811
    page = opened_walk(browser, server_url, width)
    sent = api_walk(client, walk_data(page, "token"), walk_data(page, "step"))
    stage = next(s for s in sent["stages"] if s["key"] == "decoder.cross.softmax")
    page.locator("#walkthrough select.wk-list").select_option(str(stage["number"]))
    requests = watch_events(page)
    for layer, head in ((3, 2), (sent["layers"], sent["heads"]), (2, 1)):
        page.locator("#walkthrough select.wk-layer").select_option(str(layer))
        page.locator("#walkthrough select.wk-head").select_option(str(head))
        assert walk_data(page, "stage") == stage["number"]  # the stage stays
        expected = version(stage, layer, head)
        title = page.locator("#walkthrough .wk-stage .wk-title").inner_text()
        assert title == f"{stage['number']}. {expected['title']}"
        assert title.endswith(f"layer {layer}, head {head}: softmax")
        check_numbers(page, expected | {"key": stage["key"]})
    # pin one head, pick another: both drawn side by side
    page.locator("#walkthrough .wk-pin").click()
    page.locator("#walkthrough select.wk-head").select_option("3")
    assert page.locator("#walkthrough .wk-pair .wk-stage").count() == 2
    page.locator("#walkthrough").screenshot(path=str(SCREENSHOTS / ("walkthrough.png" if width == 1400 else
                                                                    "walkthrough-phone.png")))
    assert requests == [], requests
    page.close()


@pytest.mark.parametrize("width", [1400])
def test_page_keys_stay_the_pages_and_arrows_move_stages_in_the_walk(browser, server_url, width):  # noqa: F811
    page = opened_walk(browser, server_url, width, 700)
    page.locator("#translation textarea").focus()  # focus outside the walk
    page.evaluate("() => window.scrollTo(0, 0)")
    before = walk_data(page, "stage")
    page.keyboard.press("PageDown")
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.scrollY") > 0 or page.evaluate(
        "() => document.querySelector('.gradio-container').scrollTop") > 0  # the page scrolled
    page.keyboard.press("ArrowRight")
    assert walk_data(page, "stage") == before  # not the walk's
    page.locator(WALK).focus()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    assert walk_data(page, "stage") == before + 2
    page.keyboard.press("ArrowLeft")
    assert walk_data(page, "stage") == before + 1
    page.close()


@pytest.mark.parametrize("width", [1400])
def test_hovering_a_score_lights_its_query_and_key(browser, server_url, width, client):  # noqa: F811
    page = opened_walk(browser, server_url, width)
    sent = api_walk(client, walk_data(page, "token"), walk_data(page, "step"))
    causal = next(s for s in sent["stages"] if s["key"] == "decoder.decoder_self.scores")
    page.locator("#walkthrough select.wk-list").select_option(str(causal["number"]))
    cell = page.locator("#walkthrough .wk-numbers[data-name='masked_scores'] td.wk-value[data-row='2'][data-col='1']")
    cell.hover()
    assert cell.get_attribute("title").startswith("query 3 · key 2")
    lit = page.locator("#walkthrough .wk-numbers[data-name='masked_scores'] .wk-hl")
    assert sorted((e.get_attribute("data-ax"), e.get_attribute("data-at")) for e in lit.all()) == [("key", "1"),
                                                                                                  ("query", "2")]
    row = page.locator("#walkthrough .wk-numbers[data-name='scores'] td.wk-value[data-col='0']")
    row.hover()
    assert page.locator("#walkthrough .wk-query.wk-hl").count() == 1  # the step's query
    assert page.locator("#walkthrough .wk-numbers[data-name='scores'] th.wk-hl[data-at='0']").count() == 1
    # a residual add: hovering a feature of the sum lights the same feature of its two inputs
    residual = next(s for s in sent["stages"] if s["key"] == "decoder.cross.residual")
    page.locator("#walkthrough select.wk-list").select_option(str(residual["number"]))
    page.locator("#walkthrough .wk-numbers[data-name='sum'] .wk-value[data-index='2']").hover()
    lit = {name: page.locator(f"#walkthrough .wk-numbers[data-name='{name}'] .wk-value[data-index='2']")
           .get_attribute("class") for name in ("in", "added")}
    assert all("wk-hl" in c for c in lit.values()), lit
    page.close()


@pytest.mark.parametrize("width", [1400])
def test_the_temperature_slider_recomputes_softmax_over_the_whole_vocabulary(browser, server_url, width, client):  # noqa: F811
    page = opened_walk(browser, server_url, width)
    sent = api_walk(client, walk_data(page, "token"), walk_data(page, "step"))
    stage = next(s for s in sent["stages"] if s["key"] == "output.softmax")
    page.locator("#walkthrough select.wk-list").select_option(str(stage["number"]))
    logits = np.array([-np.inf if v == "-inf" else v for v in sent["logits"]], dtype=np.float64)
    slider = page.locator("#walkthrough input.wk-temperature")
    for temperature in (0.5, 2.0):
        slider.fill(str(temperature))
        scaled = logits / temperature
        expected = np.exp(scaled - scaled.max()) / np.exp(scaled - scaled.max()).sum()
        rows = page.locator("#walkthrough .wk-sampling tr[data-id]")
        assert rows.count() == 20
        for row in rows.all():
            shown = parse(row.locator(".wk-p").inner_text())
            assert shown == pytest.approx(expected[int(row.get_attribute("data-id"))], rel=5e-3, abs=1e-9)
    page.locator("#walkthrough input.wk-topK").fill("3")
    assert page.locator("#walkthrough .wk-sampling tr.wk-removed").count() == 17  # all but the 3 most probable
    page.locator("#walkthrough .wk-sliders").screenshot(path=str(SCREENSHOTS / "walkthrough-sliders.png"))
    page.close()


def test_the_glossary_opens_from_the_first_screen(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    from explorer.glossary import GLOSSARY

    page = open_translated(browser, server_url, SENTENCE, 1400, 900)
    assert page.locator("#glossary-open").bounding_box()["y"] < 900
    page.locator("#glossary-open").click()
    listing = page.locator("#glossary-list")
    expect(listing).to_be_visible(timeout=TIMEOUT)
    expect(listing).to_be_in_viewport(timeout=TIMEOUT)
    for term in ("ALTI+", "logit lens", "cross-attention", "length penalty", "layer picker"):
        assert GLOSSARY[term][:40] in listing.inner_text()
    page.close()


def test_dark_mode_reads(browser, server_url):  # noqa: F811
    page = opened_walk(browser, server_url + "?__theme=dark", 1400, color_scheme="dark")
    colour = page.evaluate("() => getComputedStyle(document.querySelector('#walkthrough .wk-title')).color")
    channels = [int(c) for c in colour[colour.index("(") + 1:colour.index(")")].split(",")[:3]]
    assert sum(channels) / 3 > 150, colour  # light text on the dark page
    page.locator("#walkthrough").screenshot(path=str(SCREENSHOTS / "walkthrough-dark.png"))
    page.close()


@pytest.mark.parametrize("width", [390])
def test_the_saved_walk_opens_offline_and_its_pickers_work(browser, server_url, width, client, tmp_path):  # noqa: F811
    page = opened_walk(browser, server_url, width)
    token, step = walk_data(page, "token"), walk_data(page, "step")
    page.locator("#walk-save").click()
    link = page.locator("#walk-file a[download]")
    link.wait_for(timeout=TIMEOUT)
    with page.expect_download() as download:
        link.click()
    path = tmp_path / "walk.html"
    download.value.save_as(path)
    page.close()
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!doctype html>") and "function drawWalk" in text  # the code inlined, not linked
    assert "<script src" not in text and "<link" not in text and "http://" not in text.split("<script>")[0]
    offline = browser.new_page(viewport={"width": width, "height": 900})
    fetched = []
    offline.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else
                  (fetched.append(route.request.url), route.abort()))
    offline.goto(path.as_uri())
    offline.locator("#walkthrough .wk-stage").wait_for(timeout=TIMEOUT)
    sent = api_walk(client, token, step)
    stage = next(s for s in sent["stages"] if s["key"] == "encoder.encoder_self.softmax")
    offline.locator("#walkthrough select.wk-list").select_option(str(stage["number"]))
    offline.locator("#walkthrough select.wk-layer").select_option("4")
    offline.locator("#walkthrough select.wk-head").select_option("2")
    expected = version(stage, 4, 2)
    assert offline.locator("#walkthrough .wk-stage .wk-title").inner_text() == f"{stage['number']}. {expected['title']}"
    check_numbers(offline, expected | {"key": stage["key"]})
    assert fetched == []
    offline.close()


def test_a_new_step_keeps_the_stage_layer_and_head(browser, server_url, client):  # noqa: F811
    from playwright.sync_api import expect

    page = opened_walk(browser, server_url, 1400)
    sent = api_walk(client, walk_data(page, "token"), walk_data(page, "step"))
    stage = next(s for s in sent["stages"] if s["key"] == "decoder.decoder_self.softmax")
    page.locator("#walkthrough select.wk-list").select_option(str(stage["number"]))
    page.locator("#walkthrough select.wk-layer").select_option("2")
    page.locator("#walkthrough select.wk-head").select_option("3")
    page.get_by_label("Decoding step (the piece it predicts)").click()
    page.locator("li[data-testid='dropdown-option']").nth(4).click()
    expect(page.locator(WALK)).to_have_attribute("data-step", "5", timeout=TIMEOUT)
    assert page.locator("#walkthrough .wk-stage").get_attribute("data-key") == stage["key"]
    assert (walk_data(page, "layer"), walk_data(page, "head")) == (2, 3)
    other = next(s for s in api_walk(client, walk_data(page, "token"), 5)["stages"] if s["key"] == stage["key"])
    check_numbers(page, version(other, 2, 3) | {"key": stage["key"]})
    assert len(page.locator("#walkthrough .wk-numbers[data-name='weights'] td.wk-value").all()) == 5  # 5 keys
    page.close()


def test_predict_first_asks_then_reveals_what_the_model_ranked_first(browser, server_url, client):  # noqa: F811
    page = opened_walk(browser, server_url, 1400)
    sent = api_walk(client, walk_data(page, "token"), walk_data(page, "step"))
    stage = next(s for s in sent["stages"] if s["key"] == "output.softmax")
    page.locator("#walkthrough .wk-predict").click()
    page.locator("#walkthrough select.wk-list").select_option(str(stage["number"]))
    assert "which piece" in page.locator("#walkthrough .wk-ask").inner_text()
    assert page.locator("#walkthrough .wk-stage .wk-numbers").count() == 0  # the numbers wait for the guess
    page.locator("#walkthrough .wk-reveal").click()
    probabilities = next(n for n in stage["numbers"] if n["name"] == "probabilities")
    top = probabilities["cols"][probabilities["values"].index(max(probabilities["values"]))]
    assert f"“{top}” first" in page.locator("#walkthrough .wk-answer").inner_text()
    assert page.locator("#walkthrough .wk-stage .wk-numbers").count() > 0
    page.close()
