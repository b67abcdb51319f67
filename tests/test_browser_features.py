"""The Features tab in the browser: opened with no latent chosen (none shown, none in the link), a latent clicked
beside its token, its page and histogram shown, turned off, and the steered translation beside the one as it is,
equal to the translation steered in this process; the share link carries the tab's state and restores it; the
server's log stays clean."""
import re

import pytest

from transformer.features import load_dictionary
from transformer.features.steering import Edit, steer

from .app_server import ServerLog
from .conftest import ROOT, shipped
from .test_browser import CHROMIUM, TIMEOUT, browser, open_translated, server_url  # noqa: F401
from .test_browser_clicks import ERRORS_JS, idle, log_errors

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
SENTENCE = "The boat is on the river."  # docs/features.md's worked example
POINT, LATENT = "encoder_layers.3.output", 3964  # "by / behind / in", shown beside "on"


def test_a_latent_clicked_turned_off_and_the_translation_changes(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    translator = shipped()
    expected = steer(translator, load_dictionary(ROOT / "checkpoints" / "en-de" / "features" / POINT), SENTENCE,
                     [Edit(LATENT, 0.0)], strategy="greedy")
    assert expected.before != expected.after
    page = open_translated(browser, server_url, SENTENCE)
    with ServerLog() as log:
        page.get_by_role("tab", name="Features").click()
        card = page.locator("#features-tokens .ae-token", has_text="on")
        expect(card.locator(f".ae-latent[data-latent='{LATENT}']")).to_be_visible(timeout=TIMEOUT)
        # the first open: no latent chosen, so no latent's page, no steering and no Features key in the link
        expect(page.locator("#features-latent input")).to_have_value("")
        assert page.locator("#features-about").inner_text() == page.locator("#features-steered").inner_text() == ""
        page.locator("#copy-link").click()
        expect(page.locator("#link textarea, #link input").first).to_have_value(re.compile("text="), timeout=TIMEOUT)
        assert "features_" not in page.locator("#link textarea, #link input").first.input_value()
        card.locator(f".ae-latent[data-latent='{LATENT}']").click()
        expect(page.locator("#features-about h3")).to_contain_text(f"Latent {LATENT}:", timeout=TIMEOUT)
        expect(page.locator("#features-about mark").first).to_be_visible()
        page.wait_for_function("() => document.querySelector('#features-histogram .js-plotly-plot')?.data?.length",
                               timeout=TIMEOUT)
        page.locator("#features-off").click()
        expect(page.locator("#features-steered caption")).to_contain_text(f"Latent {LATENT} turned off",
                                                                          timeout=TIMEOUT)
        cells = page.locator("#features-steered td").all_inner_texts()
        assert cells == [expected.before, expected.after]
        expect(page.locator("#features-scale input")).to_have_value("0")
        idle(page)
        assert page.evaluate(ERRORS_JS) == {"toasts": [], "components": []}
        page.locator("#copy-link").click()
        expect(page.locator("#link textarea, #link input").first).to_have_value(re.compile("features_latent="),
                                                                            timeout=TIMEOUT)
        link = page.locator("#link textarea, #link input").first.input_value()
        restored = page.context.browser.new_page()
        restored.goto(link)  # opens on the Features tab, the latent shown and turned off again
        expect(restored.locator("#features-about h3")).to_contain_text(f"Latent {LATENT}:", timeout=TIMEOUT)
        expect(restored.locator("#features-steered td").last).to_have_text(expected.after, timeout=TIMEOUT)
        restored.close()
    page.close()
    assert log_errors(log.text.getvalue().splitlines()) == [] and not log.records
    assert f"features_point={POINT}" in link and "features_scale=0" in link
