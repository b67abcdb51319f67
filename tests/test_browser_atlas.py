"""The Atlas tab in the browser, on the shipped En→De atlas, at a phone's width in dark mode: draw the maps with the
translation placed on them, click a token for its nearest corpus tokens, and open one's sentence in the other
views."""
import html

import pytest

from transformer.atlas import Atlas

from .conftest import SHIPPED, recorded, shipped
from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)"),
              pytest.mark.skipif(not (SHIPPED / "atlas" / "atlas.json").is_file(), reason="no shipped atlas")]
SENTENCE = "The dog is sleeping."
PLOT = "document.querySelector('#atlas-head .js-plotly-plot')"


def test_the_atlas_tab_places_the_translation_and_opens_a_neighbours_sentence(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = open_translated(browser, server_url, SENTENCE, 390, 900, color_scheme="dark")
    page.get_by_role("tab", name="Atlas").click()
    page.get_by_role("button", name="Draw the maps").click()
    page.wait_for_function(f"() => {PLOT}?.data?.length === 4", timeout=TIMEOUT)
    placed = page.evaluate(f"() => {PLOT}.data.slice(2).map(trace => Array.from(trace.text))")
    greedy = shipped().translate(SENTENCE, strategy="greedy")
    # cross-attention (the tab's default): the queries are the translation's pieces, the keys the source's; labels
    # are text, escaped for plotly ("</s>" would be a tag)
    assert placed == [[html.escape(t, quote=False) for t in tokens]
                      for tokens in (greedy.tgt_tokens, greedy.src_tokens)]
    matrix = page.evaluate("() => document.querySelector('#atlas-matrix .js-plotly-plot').data.length")
    atlas = Atlas.open(SHIPPED / "atlas")
    cross = atlas.stack("cross")
    assert matrix == 4 * cross.layers * cross.heads  # corpus queries and keys, and this sentence's, on every head
    page.locator("#atlas-head").screenshot(path=str(SCREENSHOTS / "atlas.png"))

    page.locator("#atlas-token label").filter(has_text="1: ").first.click()  # a click on the sentence's first token
    options = page.locator("#atlas-neighbours label")
    expect(options).to_have_count(10, timeout=TIMEOUT)
    first = options.first.text_content()
    assert "“▁The”" in first or "“The”" in first, first  # token 1 of the source, "The", near corpus "The"s
    corpus_sentence = first.split(" in: ", 1)[1].split("  →  ")[0].strip()
    assert corpus_sentence in atlas.sentences.column("source").to_pylist()
    options.first.click()
    page.get_by_role("button", name="Open this sentence").click()
    expect(page.locator("#source textarea")).to_have_value(corpus_sentence, timeout=TIMEOUT)
    reference = shipped()
    expected = reference.translate(corpus_sentence, **recorded(reference)).text
    expect(page.locator("#translation textarea")).to_have_value(expected, timeout=TIMEOUT)
    page.close()


def test_the_launched_app_answers_the_atlas_endpoints(server_url):  # noqa: F811
    """The same server through gradio_client: the shipped atlas's neighbours and a map, and a bad k named."""
    from gradio_client import Client

    client = Client(server_url, verbose=False)
    answer = client.predict("The dog is sleeping.", 2, 4, "source", 3, api_name="/atlas_neighbours")
    assert answer["piece"] == "▁dog" and len(answer["neighbours"]) == 3
    assert all(n["piece"] == "▁dog" for n in answer["neighbours"])  # at the last layer a dog is near other dogs
    head_map = client.predict("cross", 4, 1, api_name="/atlas_map")
    assert len(head_map["queries"]["x"]) == len(Atlas.open(SHIPPED / "atlas").sample_rows("target"))
    with pytest.raises(Exception, match="k must be in"):
        client.predict("The dog is sleeping.", 2, 4, "source", 0, api_name="/atlas_neighbours")
