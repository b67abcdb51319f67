"""The Hugging Face families in the app: tiny converted models (tests/hub_fixtures.py) holding every family's switches
between them, served beside the shipped checkpoints through ATTENTION_EXPLORER_HUB_MODELS (their converted folders
already in the cache, so no network). A multilingual model offers its languages and translates in the direction
chosen; every tab opens on each model with no error on the page and none in the server's log."""
from __future__ import annotations

import re
import shutil

import pytest

from .test_browser import CHROMIUM, TIMEOUT, browser, choose, open_page  # noqa: F401
from .test_browser_clicks import ERRORS_JS, idle, log_errors
from .test_browser_marian import hub_app

pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]
pytest.importorskip("transformers")

from explorer.registry import direction_label  # noqa: E402

from .hub_fixtures import Pair  # noqa: E402

SENTENCE = "Where is the train station?"
MAX_LENGTH = 6  # as test_family_views.py's sweep
# Every switch of the five families, in three models: NLLB (sinusoidal positions, language codes, pre-norm), FLAN-T5
# (relative bias, RMS norm, gated feed-forward) and BART (learned positions, embedding norm, post-norm). mBART-50's and
# T5 v1.0's switches are all among them; their pages differ only in the numbers the server sends, and
# test_family_views.py runs every event of all five there.
BROWSED = ("bart", "flan-t5", "nllb")
ENTRIES = {"nllb": "local/nllb:eng_Latn:deu_Latn", "flan-t5": "local/flan-t5", "bart": "local/bart"}


@pytest.fixture(scope="module")
def families_app(tmp_path_factory):
    """(url, {family: our Translator}, the server's log file): app.py in its own process serving checkpoints/ and a
    tiny converted model of every family."""
    root = tmp_path_factory.mktemp("families-app")
    cache, translators = root / "cache", {}
    for name in BROWSED:
        pair = Pair(name, root)
        shutil.copytree(root / name, cache / name)
        translators[name] = pair.ours
    log = root / "server.log"
    with hub_app({"ATTENTION_EXPLORER_HUB_MODELS": ",".join(ENTRIES[name] for name in BROWSED),
                  "ATTENTION_EXPLORER_HUB_CACHE": str(cache)}, log) as url:
        yield url, translators, log


def label(translators, family: str) -> str:
    """The model's name in the page's Model list: its languages where it has them, else its folder's name."""
    return direction_label(family, translators[family].config)


def test_a_multilingual_model_offers_its_languages_and_translates_the_way_chosen(browser, families_app):  # noqa: F811
    from playwright.sync_api import expect

    url, translators, _ = families_app
    page = open_page(browser, url, 1400, 900)
    expect(page.locator("#source-lang")).to_be_hidden()  # the shipped model translates one direction
    choose(page, "Model", label(translators, "nllb"))
    expect(page.get_by_label("Target language", exact=True)).to_have_value("deu_Latn", timeout=TIMEOUT)
    choose(page, "Target language", "fra_Latn")
    page.get_by_label("Source text").fill(SENTENCE)
    page.get_by_role("button", name="Translate").click()
    expected = translators["nllb"].translate(SENTENCE, strategy="greedy", max_length=64, target_lang="fra_Latn")
    expect(page.locator("#translation textarea")).to_have_value(expected.text, timeout=TIMEOUT)
    live = page.locator("#live-attention")
    live.locator("select.ae-kind").select_option("encoder_self")
    expect(live.locator(".ae-col-label").first).to_have_text("eng_Latn", timeout=TIMEOUT)
    choose(page, "Model", label(translators, "flan-t5"))
    expect(page.locator("#source-lang")).to_be_hidden(timeout=TIMEOUT)
    page.close()


@pytest.mark.parametrize("family", BROWSED)
def test_every_tab_opens_on_every_family(browser, families_app, family):  # noqa: F811
    from playwright.sync_api import expect

    url, translators, log = families_app
    page = open_page(browser, url, 1400, 900)
    choose(page, "Model", label(translators, family))
    idle(page)  # the model's own decoding settings applied first: they set the max length too
    # a random model rarely ends its sentence: a few steps give every step view several, and no view needs more
    page.locator("#decoding-settings button").first.click()  # the accordion that holds it
    max_length = page.locator("#max-length input[type=number]")
    max_length.fill(str(MAX_LENGTH))
    max_length.press("Enter")
    idle(page)
    page.get_by_label("Source text").fill(SENTENCE)
    page.get_by_role("button", name="Translate").click()
    # the result adopted (the sentence picker names it): a random model's translation may be only special pieces
    expect(page.locator("#sentence input")).to_have_value(re.compile(r"^1: "), timeout=TIMEOUT)
    idle(page)
    tabs = page.locator("[role=tab]").all_inner_texts()
    assert len(tabs) >= 15, tabs
    for tab in tabs:
        page.get_by_role("tab", name=tab, exact=True).click()
        idle(page)
    errors = page.evaluate(ERRORS_JS)
    page.close()
    assert errors == {"toasts": [], "components": []}, errors
    assert log_errors(log.read_text().splitlines()) == []
