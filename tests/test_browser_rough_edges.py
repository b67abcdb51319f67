"""The first hour's rough edges, each checked as a class in Chromium at 1280 px and 390 px: token names in legends,
counts that agree with what is drawn, nothing cut or covered on a phone, every tab labelled, the
placeholder in the model's language, and a model card that tells every training stage."""
import json
import re

import pytest

from transformer.training.model_card import training_stages

from .conftest import ROOT
from .test_browser import CHROMIUM, TIMEOUT, browser, open_page, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]

LONG = "A man in a blue jacket is riding a bicycle down the long street near the old railway station while it rains."
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.fixture(scope="module", params=list(WIDTHS))
def translated(request, browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    width, height = WIDTHS[request.param]
    page = open_page(browser, server_url, width, height)
    page.get_by_label("Source text").fill(LONG)
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translation textarea")).not_to_have_value("", timeout=TIMEOUT)
    page.locator("#live-attention .ae-heatmap").wait_for(timeout=TIMEOUT)
    yield request.param, page
    page.close()


def open_tab(page, title):
    page.get_by_role("tab", name=title, exact=True).click()


def tab_titles(page) -> list[str]:
    return page.evaluate("() => Array.from(document.querySelectorAll('[role=tab]')).map(t => t.innerText.trim())")


def test_every_tab_is_visible_by_its_label(translated):
    _, page = translated
    titles = tab_titles(page)
    assert "Training" in titles and "Export" in titles
    for title in titles:
        assert page.get_by_role("tab", name=title, exact=True).is_visible(), title
    overflow = page.locator(".overflow-menu button")
    assert overflow.count() == 0 or not overflow.first.is_visible()  # no unlabelled "⋯" hiding tabs


def test_the_heads_legend_names_the_end_and_start_tokens(translated):
    _, page = translated
    open_tab(page, "Heads")
    legend = page.get_by_text("Roles, checked in this order").first
    legend.wait_for(timeout=TIMEOUT)
    text = legend.inner_text()
    assert "sink on </s>" in text and "(or <s>)" in text
    assert legend.locator("s, del, strike").count() == 0  # no token parsed as a tag


def test_the_search_tree_counts_what_it_draws_and_draws_pieces_whole(translated):
    _, page = translated
    open_tab(page, "Search tree")
    note = page.locator("#search-tree .tree-note")
    note.wait_for(timeout=TIMEOUT)
    columns = page.evaluate("() => Array.from(document.querySelectorAll('#search-tree svg > text'))"
                            ".map(t => t.textContent).filter(t => t.startsWith('step '))")
    drawn = int(re.search(r"over (\d+) steps", note.inner_text()).group(1))
    assert columns == [f"step {n}" for n in range(1, drawn + 1)]
    nodes = page.evaluate("() => Array.from(document.querySelectorAll('#search-tree .tree-node')).map(n => "
                          "[n.querySelector('text').textContent, n.querySelector('title').textContent.split(' · ')[0],"
                          " n.querySelector('text').getBBox().width, n.querySelector('rect').getBBox().width])")
    assert nodes
    for shown, token, text_width, box_width in nodes:
        assert shown == token and "…" not in shown and text_width <= box_width, (shown, token)


def test_figure_titles_fit_their_figure(translated):
    _, page = translated
    open_tab(page, "Step by step")
    page.locator("#step-source-plot .js-plotly-plot .gtitle").first.wait_for(timeout=TIMEOUT)
    boxes = page.evaluate("() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(p => p.offsetWidth)"
                          ".map(p => { const t = p.querySelector('.gtitle'); const f = p.getBoundingClientRect();"
                          " if (!t) return null; const b = t.getBoundingClientRect();"
                          " return [b.left - f.left, b.right - f.left, f.width, t.textContent]; }).filter(Boolean)")
    assert boxes
    for left, right, width, title in boxes:
        assert left >= -1 and right <= width + 1, (title, left, right, width)


def test_sentence_menus_end_before_their_arrow(translated):
    _, page = translated
    style = page.evaluate("() => { const s = getComputedStyle(document.querySelector('#sentence input'));"
                          " return [s.textOverflow, parseFloat(s.paddingRight)]; }")
    assert style[0] == "ellipsis" and style[1] >= 20


def test_the_live_picture_is_on_the_first_screen(translated):
    name, page = translated
    page.evaluate("() => window.scrollTo(0, 0)")
    top = page.evaluate("() => document.querySelector('#live-attention .ae-heatmap').getBoundingClientRect().top")
    # the picture starts on the first screen, not just its toolbar: its first rows show
    assert top < WIDTHS[name][1] - (100 if name == "desktop" else 60)
    if name == "desktop":
        return
    # a phone: the examples come before the picture, every menu of it shows its whole choice, the map is whole
    order = page.evaluate("() => ['#source', '#model', '#example', '#translation', '#live-attention']"
                          ".map(s => document.querySelector(s).getBoundingClientRect().top)")
    assert order == sorted(order)
    cut = page.evaluate("""() => {
      const pen = document.createElement('canvas').getContext('2d');
      const fits = e => {  // a menu's chosen text, as wide as its font draws it, inside the box less its arrow
        if (e.tagName !== 'SELECT') return e.scrollWidth <= e.clientWidth + 1;
        pen.font = getComputedStyle(e).font;
        return pen.measureText(e.options[e.selectedIndex].text).width + 20 <= e.clientWidth;
      };
      return Array.from(document.querySelectorAll('#model input, #live-attention select')).filter(e => !fits(e))
        .map(e => e.outerHTML.slice(0, 80));
    }""")
    assert cut == [], cut
    heatmap = page.locator("#live-attention .ae-heatmap").bounding_box()
    assert heatmap["x"] >= 0 and heatmap["x"] + heatmap["width"] <= WIDTHS[name][0]
    # Plotly's toolbar stays out of the way of titles and badges until the figure is hovered
    open_tab(page, "Step by step")
    page.locator("#candidates-plot .modebar-container").first.wait_for(state="attached", timeout=TIMEOUT)
    assert page.evaluate("() => getComputedStyle(document.querySelector('#candidates-plot .modebar-container'))"
                         ".opacity") == "0"


def test_the_placeholder_follows_the_source_language(browser, server_url):  # noqa: F811
    page = open_page(browser, server_url)
    examples = {lang: (ROOT / "explorer" / "static" / f"examples.{lang}.txt").read_text().splitlines()[0]
                for lang in ("en", "de")}
    assert examples["en"] in page.locator("#source textarea").get_attribute("placeholder")
    page.get_by_label("Model", exact=True).click()
    page.get_by_role("option", name=re.compile(r"German → English")).click()
    page.wait_for_function("(text) => document.querySelector('#source textarea').placeholder.includes(text)",
                           arg=examples["de"], timeout=TIMEOUT)
    page.close()


def test_the_model_tab_tells_every_training_stage(browser, server_url):  # noqa: F811
    page = open_page(browser, server_url)
    page.get_by_role("tab", name="Model", exact=True).click()
    card = page.locator("#model-card")
    card.wait_for(timeout=TIMEOUT)
    stages = training_stages(json.loads((ROOT / "checkpoints" / "en-de" / "metrics.json").read_text()))
    assert len(stages) == 2  # the shipped En→De: a GPU stage from random weights, then a CPU warm start
    text = card.inner_text()
    assert f"Trained in {len(stages)} stage(s)" in text
    for stage in stages:
        assert f"{stage['updates']:,} updates in {stage['wall_minutes']} min on {stage['hardware']}" in text
    page.close()
