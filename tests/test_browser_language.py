"""Text in the other language (explorer/language.py): German typed into the English → German model gets an offer
of German → English, and one click translates it with that model; English typed into it gets no offer."""
import re

import pytest

from transformer import Translator

from .conftest import ROOT
from .test_browser import CHROMIUM, TIMEOUT, browser, open_page, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]

GERMAN = "Wo ist der Bahnhof?"


def translate(page, text):
    from playwright.sync_api import expect

    box = page.locator("#translation textarea")
    before = box.input_value()
    page.get_by_label("Source text").fill(text)
    page.get_by_role("button", name="Translate").click()
    expect(box).not_to_have_value(before, timeout=TIMEOUT)


def test_german_typed_into_english_german_is_offered_german_english_in_one_click(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    page = open_page(browser, server_url)
    expect(page.locator("#model input")).to_have_value(re.compile("English → German"))
    translate(page, "Where is the train station?")
    offer = page.locator("#language-offer")
    expect(offer).to_be_hidden()  # English into English → German: nothing to offer

    translate(page, GERMAN)
    expect(offer).to_be_visible(timeout=TIMEOUT)
    expect(offer).to_contain_text("German → English")
    expect(page.locator("#summary")).to_contain_text("looks German")
    expect(page.locator("#model input")).to_have_value(re.compile("English → German"))  # never switched silently

    offer.click()
    # the model the offer names, with the decoding its card records, computed here without the app
    reference = Translator.from_pretrained(ROOT / "checkpoints" / "de-en")
    strategy, settings = reference.recorded_decoding()
    expected = reference.translate(GERMAN, strategy=strategy, **settings).text
    expect(page.locator("#translation textarea")).to_have_value(expected, timeout=TIMEOUT)
    expect(page.locator("#model input")).to_have_value(re.compile("German → English"))
    expect(offer).to_be_hidden()
    assert "station" in expected.lower()
    page.close()
