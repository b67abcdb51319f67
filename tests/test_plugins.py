"""A view and a decoding strategy defined only in this file reach the package, the page and both API
endpoints through one registration line each."""
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import pytest
import torch
from gradio_client import Client

from explorer.registry import discover
from explorer.request import Request
from explorer.shell import CSS, build_demo
from explorer.views import MODEL, VIEWS, View, current_translation
from transformer.decoding.strategies import register, setting, unregister
from transformer.decoding.strategies.registry import Strategy
from transformer.decoding.strategies.single_path import decode_single_path
from transformer.tokenizer import BOS_ID

from .conftest import ROOT, SHIPPED

CHROMIUM = Path("/usr/bin/chromium")
SENTENCE = "A dog runs through the snow."


@dataclass
class RankSettings:
    rank: int = setting(2, 1, 5, "Candidate rank (toy)", step=1, help="always take the candidate of this rank")
    # named like the sampling strategy's setting, with another range: each strategy's settings are its own
    temperature: float = setting(1.0, 0.5, 2.0, "Temperature (toy)", step=0.1, help="sharpens the probabilities shown")


def decode_kth_best(model, sources, settings, max_length=None, probes=(), use_cache=True, prefixes=None):
    def choose(logits, rows):
        probs = (logits / settings.temperature).softmax(dim=-1)  # the ranks, and so the output, do not change
        return probs, probs.topk(settings.rank, dim=-1).indices[:, -1]

    return decode_single_path(model, sources, choose, max_length, probes, use_cache, prefixes)


class PieceCountView(View):
    name, title = "toy", "Piece count"
    reads = ("sentence",)

    def build(self, context):
        return {"toy_count": gr.Markdown(elem_id="toy-count")}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        return {"toy_count": f"{len(translation.src_tokens)} source pieces, {len(translation.tgt_tokens)} target pieces"}


@pytest.fixture(scope="module")
def kth_best():
    register(Strategy("kth", "k-th best", RankSettings, decode_kth_best))  # the strategy's one registration line
    yield
    unregister("kth")


@pytest.fixture(scope="module")
def app(kth_best):
    demo, ui = build_demo(discover(ROOT / "checkpoints"), views=[*VIEWS, PieceCountView()])  # the view's one line
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", server_port=None,
                            run_history=False, css=CSS)
    yield ui, url
    demo.close()


def test_the_strategy_decodes_through_the_translator(app):
    ui, _ = app
    translator = ui.registry.get("en-de").translator
    out = translator.translate(SENTENCE, strategy="kth", rank=2, max_length=6)
    assert out.strategy == "kth" and out.settings == {"rank": 2, "temperature": 1.0, "max_length": 6, "prefix": ""}
    src = torch.tensor([out.src_ids])
    with torch.no_grad():  # independent: a teacher-forced pass ranks every step's candidates
        logits = translator.model(src, torch.tensor([[BOS_ID] + out.tgt_ids[:-1]]))[0]
    logits[:, [0, BOS_ID]] = float("-inf")
    assert out.tgt_ids == logits.topk(2, dim=-1).indices[:, 1].tolist()
    with pytest.raises(ValueError, match=r"rank must be in \[1, 5\], got 9"):
        translator.translate(SENTENCE, strategy="kth", rank=9)


def test_both_endpoints_take_the_new_strategys_settings_in_its_own_namespace(app):
    ui, url = app
    client = Client(url, verbose=False)
    expected = ui.registry.get("en-de").translator.translate(SENTENCE, strategy="kth", rank=3, max_length=8)
    kth = {"strategy": "kth", "settings": {"rank": 3, "temperature": 1.5}, "max_length": 8}
    details = client.predict(SENTENCE, **kth, api_name="/translate_details")
    assert details["sentences"][0]["tgt_ids"] == expected.tgt_ids  # the temperature changes no rank
    assert details["settings"]["temperature"] == 1.5
    assert client.predict(SENTENCE, **kth, api_name="/translate")["translation"] == expected.text
    with pytest.raises(Exception, match=r"rank must be in \[1, 5\]"):
        client.predict(SENTENCE, strategy="kth", settings={"rank": 0}, api_name="/translate")
    # the same name, each strategy's own range: 3.0 is too hot for kth, fine for sampling
    with pytest.raises(Exception, match=r"temperature must be in \[0.5, 2.0\]"):
        client.predict(SENTENCE, strategy="kth", settings={"temperature": 3.0}, api_name="/translate")
    sampled = client.predict(SENTENCE, strategy="sample", settings={"temperature": 3.0, "seed": 1}, api_name="/translate")
    assert sampled["settings"]["temperature"] == 3.0


def test_the_page_renders_the_new_view_for_the_new_strategy(app):
    ui, _ = app
    expected = ui.registry.get("en-de").translator.translate(SENTENCE, strategy="kth", rank=3, max_length=8)
    named = ui.translate(Request.from_api(ui.registry, SENTENCE, strategy="kth", settings={"rank": 3}, max_length=8))
    assert named["translation"] == expected.text
    assert named["toy_count"] == f"{len(expected.src_tokens)} source pieces, {len(expected.tgt_tokens)} target pieces"
    # each strategy's temperature is a control of its own on the page, and the page's request reads the chosen one
    assert {"kth.temperature", "sample.temperature"} <= set(ui.request_names)
    values = {name: ui.components[name].value for name in ui.request_names} | {
        "source": SENTENCE, "strategy": "kth", "kth.rank": 3, "kth.temperature": 0.5, "sample.temperature": 4.0}
    assert Request.from_page(ui.registry, values).settings == {"rank": 3, "temperature": 0.5}


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")
@pytest.mark.browser
def test_the_page_shows_the_new_strategy_its_setting_and_the_new_tab(app):
    from playwright.sync_api import expect, sync_playwright

    from .test_browser import CHROMIUM_ARGS, TIMEOUT

    _, url = app
    expected = discover(ROOT / "checkpoints").get("en-de").translator.translate(SENTENCE, strategy="kth", rank=2)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.goto(url)
        expect(page.locator("#footer")).to_contain_text("decoding", timeout=TIMEOUT)  # its load events answered
        page.get_by_label("Source text").fill(SENTENCE)
        page.get_by_text("Decoding settings").click()
        page.get_by_label("k-th best").check()
        expect(page.get_by_label("Candidate rank (toy)", exact=False).first).to_be_visible()
        expect(page.locator("#setting-kth-temperature")).to_be_visible()  # its own, beside sampling's hidden one
        expect(page.locator("#setting-sample-temperature")).to_be_hidden()
        page.get_by_role("button", name="Translate").click()
        expect(page.locator("#translation textarea")).to_have_value(expected.text, timeout=TIMEOUT)
        tab = page.get_by_role("tab", name="Piece count")
        if tab.count():
            tab.click()
        else:  # a full tab row: the last tabs are under Gradio's "More tabs"
            page.get_by_role("button", name="More tabs").click()
            page.locator(".overflow-dropdown button", has_text="Piece count").click()
        expect(page.locator("#toy-count")).to_contain_text(f"{len(expected.tgt_tokens)} target pieces", timeout=TIMEOUT)
        browser.close()


def test_a_view_name_clash_is_refused(kth_best):
    class Clash(PieceCountView):
        name = "clash"

        def build(self, context):
            return {"translation": gr.Markdown()}

    with pytest.raises(ValueError, match=r"component names \['translation'\] are used twice; view 'clash'"):
        build_demo(discover(SHIPPED.parent), views=[*VIEWS, Clash()])
