"""The app as a person uses it: headless Debian Chromium driven by Playwright against a launched server.

Screenshots of each view go to .screenshots/ (ignored by git); `bash scripts/screenshots.sh` writes them
to assets/screenshots/ instead, which the README shows.
"""
import csv
import json
import os
import re
from pathlib import Path

import pytest

from .app_server import running_app
from .conftest import ROOT, recorded, shipped

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = Path(os.environ.get("SCREENSHOT_DIR", ROOT / ".screenshots"))
SENTENCE = "A man in a blue jacket is riding a bicycle down the street."
TIMEOUT = 30_000


@pytest.fixture(scope="module")
def server_url():
    with running_app() as (_, url):
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_page(browser, url, width=1280, height=1000, **options):
    """A new page at `url`, once the app in it has answered its first load event (the footer's). Before that a
    value typed or a click can reach a page whose events are not wired yet, as a visitor's could not."""
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": width, "height": height}, **options)
    page.goto(url)
    expect(page.locator("#footer")).to_contain_text("decoding", timeout=TIMEOUT)
    return page


@pytest.fixture(scope="module")
def page(browser, server_url):
    """One visitor's page, translated once; later tests walk its views."""
    from playwright.sync_api import expect

    page = open_page(browser, server_url)
    page.get_by_label("Source text").fill(SENTENCE)
    page.get_by_role("button", name="Translate").click()
    reference = shipped()
    expected = reference.translate(SENTENCE, **recorded(reference)).text
    expect(page.locator("#translation textarea")).to_have_value(expected, timeout=TIMEOUT)
    wait_for_plot(page, "#candidates-plot")  # the visible tab; other tabs draw when opened
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield page
    page.close()


def open_translated(browser, url, sentence, width=1280, height=1000, strategy=None, **options):
    """A new page that has translated `sentence` (with `strategy`'s radio checked first, when given), its result
    adopted by the server (the sentence picker names it): the browser shows the route's answer first, and an event
    sent before the adoption finds the page's earlier result (explorer/page_translate.py)."""
    page = open_page(browser, url, width, height, **options)
    translate(page, sentence, strategy)
    return page


def translate(page, sentence, strategy=None) -> None:
    """Translates `sentence` on an open page that has translated nothing yet, as open_translated says."""
    from playwright.sync_api import expect

    page.get_by_label("Source text").fill(sentence)
    if strategy:
        page.get_by_text("Decoding settings").click()
        page.get_by_role("radio", name=strategy).check()
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translation textarea")).not_to_have_value("", timeout=TIMEOUT)
    expect(page.locator("#sentence input")).to_have_value(re.compile(r"^1: "), timeout=TIMEOUT)


def wait_for_plot(page, selector):
    page.wait_for_function(
        f"() => {{ const p = document.querySelector('{selector} .js-plotly-plot');"
        " return p && p.data && p.data.length > 0; }",
        timeout=TIMEOUT,
    )


def plot_data(page, selector):
    return page.evaluate(f"() => {{ const p = document.querySelector('{selector} .js-plotly-plot');"
                         " return {data: JSON.parse(JSON.stringify(p.data)), title: p.layout.title.text,"
                         " x: p.data[0].x, y: p.data[0].y, yticks: p.layout.yaxis.ticktext}; }")


def choose(page, label, option):
    page.get_by_label(label, exact=True).click()
    page.locator(
        f"li[data-testid='dropdown-option'][aria-label='{option}']"
    ).click()  # Gradio's list, not the live view's


def test_translate_shows_translation_tokens_and_timing(page):
    from playwright.sync_api import expect

    expect(page.locator("#summary")).to_contain_text("translated in")
    page.screenshot(path=str(SCREENSHOTS / "translate.png"), full_page=False)
    # the footer names the decoding path this server takes: the float16-weight kernel, or float32 and why
    from transformer.core.half_linear import KERNEL

    footer = page.locator("#footer").inner_text()
    assert ("through the compiled kernel" in footer) == (KERNEL.status == "ready"), (footer, KERNEL.status)


def test_step_through_decoding(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Step by step").click()
    slider = page.locator("#step input[type=number]")
    slider.fill("2")
    slider.press("Enter")
    expect(page.locator("#step-text")).to_contain_text("Step 2 of", timeout=TIMEOUT)
    expect(page.locator("#step-text")).to_contain_text("Decoder input so far: <s> ")  # shown as text, not escaped twice
    wait_for_plot(page, "#candidates-plot")
    bars = plot_data(page, "#candidates-plot")
    probs = bars["data"][0]["x"]
    assert probs == sorted(probs, reverse=True) and 0 < probs[0] <= 1
    assert any("chosen" in label for label in bars["yticks"])
    first = page.locator("#step-text").inner_text()
    slider.fill("3")
    slider.press("Enter")
    expect(page.locator("#step-text")).to_contain_text("Step 3 of", timeout=TIMEOUT)
    assert page.locator("#step-text").inner_text() != first
    page.locator("#step").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "steps.png"), full_page=True)


def test_attention_kind_layer_and_head_change_the_heatmap(page):
    page.get_by_role("tab", name="Attention").click()
    wait_for_plot(page, "#attention-plot")
    before = plot_data(page, "#attention-plot")
    assert "Cross-attention" in before["title"]
    page.get_by_role("radio", name="Encoder self-attention").check()
    page.wait_for_function(
        "() => document.querySelector('#attention-plot .js-plotly-plot').layout.title.text.startsWith('Encoder')",
        timeout=TIMEOUT,
    )
    encoder = plot_data(page, "#attention-plot")
    assert encoder["x"] == encoder["y"]  # source tokens on both axes
    choose(page, "Layer", "Layer 1")
    page.wait_for_function(
        "() => document.querySelector('#attention-plot .js-plotly-plot').layout.title.text.includes('layer 1')",
        timeout=TIMEOUT,
    )
    choose(page, "Head", "Head 2")
    page.wait_for_function(
        "() => document.querySelector('#attention-plot .js-plotly-plot').layout.title.text.includes('head 2')",
        timeout=TIMEOUT,
    )
    head2 = plot_data(page, "#attention-plot")
    assert head2["data"][0]["z"] != before["data"][0]["z"]
    page.locator("#attention-plot").screenshot(path=str(SCREENSHOTS / "attention.png"))
    choose(page, "Head", "All heads (tiled)")
    page.wait_for_function(
        "() => document.querySelector('#attention-plot .js-plotly-plot').layout.title.text.includes('all')",
        timeout=TIMEOUT,
    )
    page.locator("#attention-plot").screenshot(path=str(SCREENSHOTS / "attention-heads.png"))


def test_positional_encoding_and_model_views(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Positional encoding").click()
    wait_for_plot(page, "#encoding-plot")
    wait_for_plot(page, "#norms-plot")
    page.locator("#encoding-plot").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "positional.png"), full_page=True)
    page.get_by_role("tab", name="Model").click()
    expect(page.locator("#model-card")).to_contain_text("matches the closed-form count", timeout=TIMEOUT)
    expect(page.locator("#architecture")).to_contain_text("encoder_layers.0.self_attention", timeout=TIMEOUT)
    page.locator("#model-card").screenshot(path=str(SCREENSHOTS / "model.png"))


def test_export_downloads_parse(page, tmp_path):
    page.get_by_role("tab", name="Export").click()
    page.get_by_role("button", name="Export JSON, CSV, bertviz and HTML").click()
    link = page.locator("#export-files a[download='translation.json']")
    link.wait_for(timeout=TIMEOUT)
    with page.expect_download() as download:
        link.click()
    path = tmp_path / "translation.json"
    download.value.save_as(path)
    data = json.loads(path.read_text())["sentences"][0]
    assert data["text"] == page.locator("#translation textarea").input_value()
    assert len(data["attention"]["cross"]["weights"][0][0]) == len(data["tgt_tokens"])
    with page.expect_download() as download:
        page.locator("#export-files a[download='attention.csv']").click()
    download.value.save_as(tmp_path / "attention.csv")
    page.locator("#export-files").screenshot(path=str(SCREENSHOTS / "export.png"))
    rows = list(csv.DictReader((tmp_path / "attention.csv").open()))
    assert {r["kind"] for r in rows} == {"encoder_self", "decoder_self", "cross"}


def test_dark_mode_and_phone_width(browser, server_url):
    from playwright.sync_api import expect

    page = open_page(browser, server_url + "?__theme=dark", 390, 844, color_scheme="dark")
    page.get_by_label("Source text").fill("Two dogs are running through the snow.")
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translation textarea")).not_to_have_value("", timeout=TIMEOUT)
    page.get_by_role("tab", name="Attention").click()
    wait_for_plot(page, "#attention-plot")
    fill = page.evaluate("() => getComputedStyle(document.querySelector('#attention-plot .xtick text')).fill")
    assert fill == "rgb(229, 231, 235)"  # light text on the dark page
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390 + 1  # no sideways scrolling of the page
    page.locator("#attention-plot").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "phone-dark.png"), full_page=False)
    page.close()


def test_html_input_shows_as_text_and_never_runs(browser, server_url):
    from playwright.sync_api import expect

    page = open_page(browser, server_url)
    payload = '<img src=x onerror="window.__xss=1"><b>A dog</b> <script>window.__xss=2</script>'
    page.get_by_label("Source text").fill(payload)
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translation textarea")).not_to_have_value("", timeout=TIMEOUT)
    page.get_by_role("tab", name="Attention").click()
    # a kind chosen at once, while the tab's opening draws: the newest choice wins (wiring.wire_tab; the server's
    # side is tested in test_first_screen.py)
    page.get_by_role("radio", name="Encoder self-attention").check()
    page.wait_for_function(
        "() => document.querySelector('#attention-plot .js-plotly-plot')?.layout.title.text.startsWith('Encoder')",
        timeout=TIMEOUT,
    )
    labels = page.locator("#attention-plot .xtick text").all_text_contents()
    shown = "".join(labels).replace("\u200b", "").replace("\u200c", "")
    assert "<0x3C>img" in shown, labels  # the markup is there as text on the axis (< is a byte piece)
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("img[src='x']").count() == 0 and page.locator("#attention-plot b").count() == 0
    page.get_by_role("tab", name="Tokens").click()
    expect(page.locator("#source-tokens")).to_contain_text("<0x3C>", timeout=TIMEOUT)  # literal, not a tag
    assert page.locator("#source-tokens img").count() == 0
    page.close()


def test_choosing_a_model_brings_the_decoding_its_card_reports(browser, server_url):
    from playwright.sync_api import expect

    page = open_page(browser, server_url)
    page.get_by_text("Decoding settings").click()
    for model, label in (("de-en", "German → English (de-en)"), ("en-de", "English → German (en-de)")):
        decoding = json.loads((ROOT / "checkpoints" / model / "metrics.json").read_text())["decoding"]
        choose(page, "Model", label)
        expect(page.locator("#setting-beam-length_penalty input[type=number]")).to_have_value(
            f"{decoding['length_penalty']:g}", timeout=TIMEOUT)
        expect(page.get_by_role("radio", name="beam search")).to_be_checked()
    page.close()


def test_an_everyday_question_gets_german_back(browser, server_url):
    """What a teacher types first: the shipped En→De model learned everyday sentences (Tatoeba), not only
    image captions, so "How are you?" comes back as German that asks how ("Wie ..."), with its attention drawn."""
    from playwright.sync_api import expect

    page = open_translated(browser, server_url, "How are you?")
    expect(page.locator("#translation textarea")).to_have_value(re.compile(r"\bWie\b"), timeout=TIMEOUT)
    page.locator("#live-attention .ae-heatmap, #live-attention svg").first.wait_for(timeout=TIMEOUT)
    page.close()
