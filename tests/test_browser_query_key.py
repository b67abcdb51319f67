"""The query·key breakdown in the browser: a click on a row of the live heatmap (one head) opens it for that query,
and its weight bars are the row the heatmap draws (the attention the translation recorded)."""
import numpy as np
import pytest

from .conftest import recorded, shipped
from .test_browser import CHROMIUM, SCREENSHOTS, TIMEOUT, browser, open_translated, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "Two dogs are running through the snow."


def test_a_heatmap_row_opens_its_query_key_breakdown(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = open_translated(browser, server_url, SENTENCE, 1400, 900)
    live = page.locator("#live-attention")
    live.locator(".ae-heatmap").wait_for(timeout=TIMEOUT)
    for selector, value in [("select.ae-kind", "cross"), ("select.ae-layer", "1"), ("select.ae-head", "2")]:
        live.locator(selector).select_option(value)
    row = 2
    token = live.locator(".ae-row-label").nth(row).text_content()
    live.locator(".ae-row-label").nth(row).click()
    expect(page.locator("#qk-text")).to_contain_text(f"query “{token}”", timeout=TIMEOUT)
    assert page.get_by_role("tab", name="Query · key", selected=True).count() == 1
    page.wait_for_function("() => document.querySelector('#qk-plot .js-plotly-plot')?.data?.length === 5",
                           timeout=TIMEOUT)
    weights = page.evaluate("() => Array.from(document.querySelector('#qk-plot .js-plotly-plot').data[4].x)")
    reference = shipped()
    expected = reference.translate(SENTENCE, capture=True, **recorded(reference)).recorded["cross"].values[1, 2, row]
    # the plot's numbers are rounded to 4 decimals (explorer/figures/theme.py DECIMALS), computed by the server's
    # teacher-forced pass against the test's decoding: 5e-5 and float32 rounding
    np.testing.assert_allclose(weights, expected, atol=2e-4)
    page.locator("#qk-plot").screenshot(path=str(SCREENSHOTS / "query-key.png"))
    # the view's own controls: another query of the same head, by the button
    page.get_by_label("Query token", exact=True).click()
    page.locator("li[data-testid='dropdown-option']").first.click()
    page.get_by_role("button", name="Break down this head's weights").click()
    expect(page.locator("#qk-text")).to_contain_text("query “", timeout=TIMEOUT)
    page.close()
