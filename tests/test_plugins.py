"""A view and a decoding strategy defined only in this file reach the package, the page and both API
endpoints through one registration line each."""
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import pytest
import torch
from gradio_client import Client

from explorer.registry import discover
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


def decode_kth_best(model, sources, settings, max_length=None, probes=(), use_cache=True, prefixes=None):
    def choose(logits, rows):
        probs = logits.softmax(dim=-1)
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
    assert out.strategy == "kth" and out.settings == {"rank": 2, "max_length": 6, "prefix": ""}
    src = torch.tensor([out.src_ids])
    with torch.no_grad():  # independent: a teacher-forced pass ranks every step's candidates
        logits = translator.model(src, torch.tensor([[BOS_ID] + out.tgt_ids[:-1]]))[0]
    logits[:, [0, BOS_ID]] = float("-inf")
    assert out.tgt_ids == logits.topk(2, dim=-1).indices[:, 1].tolist()
    with pytest.raises(ValueError, match=r"rank must be in \[1, 5\], got 9"):
        translator.translate(SENTENCE, strategy="kth", rank=9)


def test_both_endpoints_take_the_new_setting_and_return_the_new_view(app):
    ui, url = app
    client = Client(url, verbose=False)
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    for api in ("/translate", "/translate_details"):
        names = [p["parameter_name"] for p in endpoints[api]["parameters"]]
        assert names[names.index("seed") + 1 : names.index("max_length")] == ["rank"]
    expected = ui.registry.get("en-de").translator.translate(SENTENCE, strategy="kth", rank=3, max_length=8)
    details = client.predict(SENTENCE, strategy="kth", rank=3, max_length=8, api_name="/translate_details")
    assert details["sentences"][0]["tgt_ids"] == expected.tgt_ids
    outputs = dict(zip(ui.translate_output_names, client.predict(SENTENCE, strategy="kth", rank=3, max_length=8,
                                                                 api_name="/translate")))
    assert outputs["translation"] == expected.text
    assert outputs["toy_count"] == f"{len(expected.src_tokens)} source pieces, {len(expected.tgt_tokens)} target pieces"
    with pytest.raises(Exception, match=r"Candidate rank \(toy\) must be in \[1, 5\]"):
        client.predict(SENTENCE, strategy="kth", rank=0, api_name="/translate")


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
        page.get_by_label("Source text").fill(SENTENCE)
        page.get_by_text("Decoding settings").click()
        page.get_by_label("k-th best").check()
        expect(page.get_by_label("Candidate rank (toy)", exact=False).first).to_be_visible()
        page.get_by_role("button", name="Translate").click()
        expect(page.locator("#translation textarea")).to_have_value(expected.text, timeout=TIMEOUT)
        page.get_by_role("tab", name="Piece count").click()
        expect(page.locator("#toy-count")).to_contain_text(f"{len(expected.tgt_tokens)} target pieces", timeout=TIMEOUT)
        browser.close()


def test_a_view_name_clash_is_refused(kth_best):
    class Clash(PieceCountView):
        name = "clash"

        def build(self, context):
            return {"translation": gr.Markdown()}

    with pytest.raises(ValueError, match=r"component names \['translation'\] are used twice; view 'clash'"):
        build_demo(discover(SHIPPED.parent), views=[*VIEWS, Clash()])
