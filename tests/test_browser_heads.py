"""Heads and attribution in the browser: switch heads off and see the translation change, sort the
statistics table, open the attribution view."""
import re

import pytest

from .conftest import SHIPPED, recorded, shipped
from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "A man in a blue jacket is riding a bicycle down the street."


@pytest.fixture(scope="module")
def page(browser, server_url):  # noqa: F811
    page = open_translated(browser, server_url, SENTENCE)
    page.get_by_role("tab", name="Heads").click()
    page.wait_for_function("() => document.querySelector('#head-grids .js-plotly-plot')?.data?.length > 0",
                           timeout=TIMEOUT)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield page
    page.close()


def test_switching_heads_off_changes_the_translation(page):
    from playwright.sync_api import expect

    reference = shipped()
    config = reference.model.config
    off = [("cross", layer, head) for layer in range(config.n_layers) for head in range(config.n_heads)]
    expected = reference.translate(SENTENCE, heads_off=off, max_length=64, **recorded(reference))
    assert expected.text != reference.translate(SENTENCE, max_length=64, **recorded(reference)).text
    for box in page.locator("#off-cross input[type=checkbox]").all():
        box.check()
    page.get_by_role("button", name="Translate with these heads off").click()
    expect(page.locator("#ablation-text")).to_contain_text(f"{len(off)} head(s) off", timeout=TIMEOUT)
    text = page.locator("#ablation-text").inner_text()
    assert "With them off:" in text and expected.text.strip()[:20] in text
    assert "a different output" in text
    page.locator("#ablation-text").screenshot(path=str(SCREENSHOTS / "ablation.png"))


ROWS_JS = ("() => Array.from(document.querySelectorAll('#head-table [role=row]')).slice(1)"
           ".map(r => Array.from(r.querySelectorAll('[role=gridcell]')).map(c => c.innerText.trim()))"
           ".filter(cells => cells.length && cells[0])")


def test_the_statistics_table_sorts(page):
    from transformer.analysis.head_stats import head_stats

    reference = shipped()
    translation = reference.translate(SENTENCE, capture=True, max_length=64, **recorded(reference))
    entropies = sorted(round(s.entropy, 3) for kind in ("encoder_self", "decoder_self", "cross")
                       for s in head_stats(translation.recorded[kind]))
    headers = [h.strip() for h in page.locator("#head-table th").all_inner_texts()]
    column = headers.index("entropy")
    shown = [float(row[column]) for row in page.evaluate(ROWS_JS)]
    assert shown and shown != sorted(shown)  # table order: by kind, layer, head
    page.locator("#head-table th").nth(column).hover()
    page.locator("#head-table th").nth(column).get_by_role("button", name="Open cell menu").click()
    page.get_by_text(re.compile("sort ascending", re.I)).first.click()
    page.wait_for_timeout(300)
    shown = [float(row[column]) for row in page.evaluate(ROWS_JS)]

    def is_run_of(values, ordered):  # the rows drawn (the table draws only those in view) are a run of `ordered`
        return any(ordered[i : i + len(values)] == values for i in range(len(ordered) - len(values) + 1))

    assert len(shown) >= 5
    assert is_run_of(shown, entropies) or is_run_of(shown, entropies[::-1]), (shown, entropies)
    page.locator("#head-grids").screenshot(path=str(SCREENSHOTS / "heads.png"))


def test_the_attribution_view_draws_three_readings(page):
    from playwright.sync_api import expect

    page.get_by_role("tab", name="Attribution").click()
    page.get_by_role("button", name="Compute attribution for this sentence").click()
    expect(page.locator("#attribution-text")).to_contain_text("Computed for", timeout=TIMEOUT)
    for plot in ("#attribution-attention", "#attribution-rollout", "#attribution-gradient"):
        page.wait_for_function(f"() => document.querySelector('{plot} .js-plotly-plot')?.data?.length > 0",
                               timeout=TIMEOUT)
    page.screenshot(path=str(SCREENSHOTS / "attribution.png"), full_page=False)


def test_the_best_alignment_head_is_named_with_its_links(page):
    import json

    report = json.loads((SHIPPED / "alignment.json").read_text())
    best = report["best_head"]
    page.get_by_role("tab", name="Heads").click()
    text = page.locator("#alignment-text").inner_text()
    assert f"layer {best['layer']}, head {best['head']}" in text and f"{best['aer']:.3f}" in text
    assert "not human annotation" in text
    norms = report["best_head_by_measure"]["norms"]["attention"]
    assert f"norm-based attention ‖α·f(x)‖ (Kobayashi et al., 2020), the best head is layer {norms['layer']}" in text
    # which explanation to trust: the checkpoint's deletion test, every method with its AOPC
    faithfulness = json.loads((SHIPPED / "faithfulness.json").read_text())
    table = page.locator("#faithfulness-text").inner_text()
    for row in faithfulness["table"]:
        assert row["method"] in table and f"{row['aopc']:.3f}" in table
    words = len([w for w in page.locator("#translation textarea").input_value().split() if w])
    assert 1 <= page.locator("#alignment-links line").count() <= words + 1
