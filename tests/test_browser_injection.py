"""A crafted link, opened in Chromium: markup in any of its parameters (or in a parameter's name) puts no element of
its making on the page, shows as text in the message, and a number that is not finite is named while the page
stays usable."""
import re
from urllib.parse import urlencode

import pytest

from .test_browser import CHROMIUM, TIMEOUT, browser, open_page, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]

FORM = '<form id="evil-form" action="https://evil.example/"><input id="evil-password" type="password"></form>'
MARKUP = FORM + ' <img id="evil-img" src="https://evil.example/p.png"> [log in again](https://evil.example/login)'
# what the visitor's markup would have made, had it been read as markup
EVIL = ('[id^="evil"], form[action*="evil"], input[type="password"], img[src*="evil"], a[href*="evil"], '
        'svg a, iframe')
SENTENCE = "A dog runs in the park."


def evil_elements(page) -> int:
    return page.evaluate("(selector) => document.querySelectorAll(selector).length", EVIL)


def toast_text(page) -> str:
    from playwright.sync_api import expect

    toast = page.locator("[data-testid='toast-body']").first
    expect(toast).to_be_visible(timeout=TIMEOUT)
    return toast.inner_text()


@pytest.mark.parametrize("name", ["model", "device", "strategy", "max_length", "heads_off", "kind", "layer", "head",
                                  "step", "beam_size", "length_penalty", MARKUP])
def test_markup_in_a_link_parameter_is_text_in_its_message(browser, server_url, name):  # noqa: F811
    params = {"text": SENTENCE, "strategy": "beam", name: MARKUP}
    page = open_page(browser, server_url + "?" + urlencode(params))
    message = toast_text(page)
    assert FORM in message, message  # the markup, shown as the characters it is made of
    assert evil_elements(page) == 0
    page.close()


def test_markup_in_the_text_and_forced_start_of_a_link_stays_text(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    params = {"text": MARKUP, "prefix": "[log in](https://evil.example/) www.evil.example", "max_length": "128"}
    page = open_page(browser, server_url + "?" + urlencode(params))
    expect(page.locator("#summary")).to_contain_text("forced start", timeout=TIMEOUT)
    assert page.locator("#source textarea").input_value() == MARKUP
    assert "[log in](https://evil.example/) www.evil.example" in page.locator("#summary").inner_text()
    assert evil_elements(page) == 0
    page.close()


@pytest.mark.parametrize("name, value, message", [
    ("max_length", "NaN", "max_length in the link must be an integer in [1, 128], got 'NaN'"),
    ("max_length", "Infinity", "max_length in the link must be an integer in [1, 128], got 'Infinity'"),
    ("beam_size", "-Infinity", "beam_size in the link must be an integer in [1, 8], got '-Infinity'"),
    ("step", "1e999", "step in the link must be an integer in [1, 10000], got '1e999'"),
])
def test_a_link_number_that_is_not_finite_is_named_and_the_page_stays_usable(  # noqa: F811
        browser, server_url, name, value, message):  # noqa: F811
    from playwright.sync_api import expect

    page = open_page(browser, server_url + "?" + urlencode({"text": SENTENCE, "strategy": "beam", name: value}))
    assert message in toast_text(page)
    page.get_by_label("Source text").fill("Where is the train station?")
    page.get_by_role("button", name="Translate").click()
    expect(page.locator("#translation textarea")).to_have_value(re.compile(r"\w"), timeout=TIMEOUT)
    page.locator("#live-attention .ae-heatmap").wait_for(timeout=TIMEOUT)
    page.close()
