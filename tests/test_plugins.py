"""A view, a decoding strategy and an analysis defined only in this file reach the package, the page and the API
endpoints through one registration line each; an analysis sees the heads a result switched off without handling
them; the default model is read from what is served."""
import copy
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
import torch
from gradio_client import Client
from torch.distributions import Categorical

from explorer import wiring
from explorer.api import one_translation, wire_api
from explorer.http_api import adding_routes_at_start
from explorer.registry import DEFAULT_MODEL_SETTING, Registry, discover
from explorer.request import DEFAULT_MAX_LENGTH, Request
from explorer.session import run
from explorer.shell import CSS, build_demo
from explorer.views import MODEL, VIEWS, View, current_translation
from explorer.views.base import translated
from transformer import Translator
from transformer.analysis import registry as analyses
from transformer.analysis.alti import alti_plus
from transformer.analysis.attribution import input_x_gradient
from transformer.analysis.registry import Analysis, ModelAccess, run_analysis
from transformer.core.head_mask import attention_modules
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies import register, setting, unregister
from transformer.decoding.strategies.registry import Strategy
from transformer.decoding.strategies.single_path import decode_single_path
from transformer.decoding.trace import Translation
from transformer.tokenizer import BOS_ID
from transformer.training import evaluate

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
        return {
            "toy_count": f"{len(translation.src_tokens)} source pieces, {len(translation.tgt_tokens)} target pieces"
        }


@pytest.fixture(scope="module")
def kth_best():
    register(Strategy("kth", "k-th best", RankSettings, decode_kth_best))  # the strategy's one registration line
    yield
    unregister("kth")


@dataclass
class HeadEntropy:
    by_kind: dict[str, np.ndarray]  # attention kind -> (layers, heads) mean entropy of the head's rows, in nats


def mean_entropy(access: ModelAccess, translation: Translation) -> HeadEntropy:
    by_kind = {}
    for kind in ATTENTION_KINDS:
        weights = translation.recorded[kind].values.astype(np.float64)  # (L, H, queries, keys)
        by_kind[kind] = -(weights * np.log(np.where(weights > 0, weights, 1.0))).sum(-1).mean(-1)
    return HeadEntropy(by_kind)


ANALYSIS = Analysis("entropy", "Mean attention entropy per head", HeadEntropy, mean_entropy,
                    to_json=lambda translation, result: {
                        "by_kind": {kind: values.round(6).tolist() for kind, values in result.by_kind.items()}})


@dataclass
class OutputLogProb:
    log_prob: float  # log p(the translation's output | its source), teacher-forced


def output_log_prob(access: ModelAccess, translation) -> OutputLogProb:
    """Runs the model, knowing nothing of switched-off heads."""
    return OutputLogProb(teacher_forced_log_prob(access.model, translation))


def teacher_forced_log_prob(model, translation) -> float:
    with torch.no_grad():
        logits = model(torch.tensor([translation.src_ids]), torch.tensor([[BOS_ID] + translation.tgt_ids[:-1]]))[0]
    return float(logits.double().log_softmax(-1).gather(1, torch.tensor(translation.tgt_ids)[:, None]).sum())


class EntropyView(View):
    """Reads a cheap analysis from the translation; its button asks the session service for an on-demand one; its
    other button jumps to the search tree at the current step."""
    name, title = "toy_entropy", "Head entropy"
    reads = ("sentence",)
    analyses = ("entropy",)  # computed for this tab when it is first drawn
    jumps = {"toy_entropy_tree": "tree"}

    def build(self, context):
        return {"toy_entropy": gr.Markdown(elem_id="toy-entropy"), "toy_log_prob": gr.Markdown(),
                "toy_entropy_ask": gr.Button("Log-probability"), "toy_entropy_tree": gr.Button("Show in tree")}

    def wire(self, ui):
        def ask(result, sentence):
            translation = translated(result, {"sentence": sentence})
            return f"log p = {ui.service.analyse(result, translation, 'log_prob').log_prob:.6f}"

        ui.components["toy_entropy_ask"].click(ask, [ui.result_state, ui.components["sentence"]],
                                               ui.components["toy_log_prob"])

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        entropy = translation.analyses["entropy"].by_kind["cross"]
        layer, head = np.unravel_index(entropy.argmin(), entropy.shape)
        return {"toy_entropy": f"Most focused cross-attention head: layer {layer + 1}, head {head + 1} "
                               f"({entropy[layer, head]:.3f} nats)"}


def independent_entropy(weights) -> np.ndarray:
    """(L, H) mean row entropy by torch's Categorical, from weights (L, H, queries, keys)."""
    weights = torch.as_tensor(np.asarray(weights), dtype=torch.float64)
    return Categorical(probs=weights / weights.sum(-1, keepdim=True)).entropy().mean(-1).numpy()


@pytest.fixture(scope="module")
def entropy():
    analyses.register(ANALYSIS)  # the analysis's one registration line
    yield
    analyses.unregister(ANALYSIS.name)


@pytest.fixture(scope="module")
def app(kth_best, entropy):
    demo, ui = build_demo(discover(ROOT / "checkpoints"), views=[*VIEWS, PieceCountView()])  # the view's one line
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", server_port=None,
                            run_history=False, css=CSS, app_kwargs={"lifespan": adding_routes_at_start(ui)})
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
    assert details["settings"]["temperature"] == 1.5  # a setting echoed back, never computed: exact
    assert client.predict(SENTENCE, **kth, api_name="/translate")["translation"] == expected.text
    with pytest.raises(Exception, match=r"rank must be in \[1, 5\]"):
        client.predict(SENTENCE, strategy="kth", settings={"rank": 0}, api_name="/translate")
    # the same name, each strategy's own range: 3.0 is too hot for kth, fine for sampling
    with pytest.raises(Exception, match=r"temperature must be in \[0.5, 2.0\]"):
        client.predict(SENTENCE, strategy="kth", settings={"temperature": 3.0}, api_name="/translate")
    sampled = client.predict(
        SENTENCE, strategy="sample", settings={"temperature": 3.0, "seed": 1}, api_name="/translate"
    )
    assert sampled["settings"]["temperature"] == 3.0  # echoed, as above


def test_evaluate_takes_the_new_strategy_and_its_flags_from_the_registry(kth_best, tmp_path, capsys):
    sources = [SENTENCE, "Two men talk on a bench.", "A girl in a red coat."]
    (tmp_path / "tiny.en").write_text("\n".join(sources) + "\n")
    (tmp_path / "tiny.de").write_text("Ein Hund.\nZwei Männer.\nEin Mädchen.\n")
    out = tmp_path / "hypotheses.txt"
    command = ["--checkpoint", str(SHIPPED), "--split", "tiny", "--data-dir", str(tmp_path), "--batch-size", "1",
               "--out", str(out), "--strategy", "kth", "--rank", "2", "--json"]
    evaluate.main(command)
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (printed["strategy"], printed["rank"], printed["temperature"]) == ("kth", 2, 1.0)
    translator = Translator.from_pretrained(SHIPPED)
    expected = [translator.translate(source, strategy="kth", rank=2).text for source in sources]
    assert out.read_text().splitlines() == expected  # one sentence a batch, as translate() decodes it
    with pytest.raises(SystemExit) as refused:
        evaluate.main(command[:-3] + ["--rank", "9"])
    assert refused.value.code == 2 and "rank must be in [1, 5], got 9" in capsys.readouterr().err


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


def test_the_analysis_is_the_one_the_recipe_writes():
    """docs/architecture.md's example analysis is this file's, line for line: the recipe is the code tested here."""
    recipe = re.search(r"### An analysis\n.*?```python\n(.*?)```", (ROOT / "docs" / "architecture.md").read_text(
        encoding="utf-8"), re.S).group(1)
    def one_blank_line(text):  # the docs part definitions by one blank line, a module by two
        return re.sub(r"\n{3,}", "\n\n", text)

    assert "class HeadEntropy" in recipe
    assert one_blank_line(recipe) in one_blank_line(Path(__file__).read_text(encoding="utf-8"))


def test_the_new_analysis_reaches_translate_details(app):
    ui, url = app
    sentence = Client(url, verbose=False).predict(SENTENCE, api_name="/translate_details")["sentences"][0]
    shown = sentence["analyses"]["entropy"]
    assert shown["label"] == "Mean attention entropy per head"
    for kind in ATTENTION_KINDS:
        expected = independent_entropy(sentence["attention"][kind]["weights"])
        # from the JSON's weights, rounded to 6 decimals: -p log p moves by up to ~1e-5 per tiny weight
        np.testing.assert_allclose(shown["by_kind"][kind], expected, atol=1e-4)
    # the built-in analyses keep their own fields, and they have no "analyses" entry of their own
    assert sentence["contributions"] is not None and set(sentence["analyses"]) == {"entropy"}


def wired(demo, component, event: str):
    """The function the shell wired to `component`'s `event`, called here as the page calls it."""
    return next(function.fn for function in demo.fns.values() if (component._id, event) in function.targets)


def test_the_page_shows_the_new_analysis_in_the_new_view(app):
    served, _ = app
    demo, ui = build_demo(served.registry, views=[*VIEWS, EntropyView()])  # a page of its own: its tabs stay in view
    named = ui.translate(Request.from_api(ui.registry, f"{SENTENCE}\nTwo men talk on a bench."))
    result = named["result"]
    texts = []
    for translation in result.translations:
        assert isinstance(translation.analyses["entropy"], HeadEntropy)
        entropy = independent_entropy(translation.recorded["cross"].values)
        layer, head = np.unravel_index(entropy.argmin(), entropy.shape)
        texts.append(f"Most focused cross-attention head: layer {layer + 1}, head {head + 1} "
                     f"({entropy[layer, head]:.3f} nats)")
    assert named["toy_entropy"] == texts[0]
    # the shell re-renders the view when a control it reads changes while its tab is open: the second sentence
    state = ui.default_state() | {"sentence": 1}
    values = [state[name] for name in ui.state_names]
    rerendered = wired(demo, ui.components["sentence"], "input")(result, *values, result.model_key, "toy_entropy")
    assert rerendered[ui.components["toy_entropy"]] == texts[1] != texts[0]
    # the view's button asks the session service for an on-demand analysis of the chosen sentence
    analyses.register(Analysis("log_prob", "Output log-probability", OutputLogProb, output_log_prob, cheap=False))
    try:
        shown = wired(demo, ui.components["toy_entropy_ask"], "click")(result, 1)
    finally:
        analyses.unregister("log_prob")
    model = ui.registry.get(result.model_key).translator.model
    # the service's run (maybe our float16 kernel) against a plain teacher-forced pass: float32 rounding
    assert float(shown.removeprefix("log p = ")) == pytest.approx(
        teacher_forced_log_prob(model, result.translations[1]), rel=1e-4)
    # the declared jump opens the search tree's tab at the current step, as the tree's at_step draws it
    jumped = wired(demo, ui.components["toy_entropy_tree"], "click")(result, *values)
    assert jumped[ui.components["tabs"]].selected == "tree"
    tree = ui.by_component(ui.view("tree").at_step(ui, result, state, 1))
    assert tree and set(tree) <= set(jumped)
    assert all(jumped[component] == value for component, value in tree.items() if isinstance(value, str))


def log_prob_endpoint(ui):
    """An on-demand analysis's endpoint, as /why_not and /query_key are written in explorer/api.py."""
    def log_prob(text: str, sentence: int = 1, model: str = None, device: str = "cpu", strategy: str = None,
                 settings: dict = None, max_length: int = DEFAULT_MAX_LENGTH, prefix: str = None,
                 heads_off: str = None) -> dict:
        """Translate, then the log-probability of line `sentence`'s translation (from 1) given its source."""
        result, translation = one_translation(ui, sentence, text, model, device, strategy, settings, max_length,
                                              prefix, heads_off)
        return {"log_prob": ui.service.analyse(result, translation, "log_prob").log_prob}

    return log_prob


def test_an_on_demand_analysis_reaches_its_own_endpoint(monkeypatch):
    registry = discover(ROOT / "checkpoints")
    # the endpoint's line in wire_api's table, added here without editing explorer/api.py
    monkeypatch.setattr(wiring, "wire_api", lambda ui, demo, more=None: wire_api(
        ui, demo, {**(more or {}), "log_prob": log_prob_endpoint(ui)}))
    demo, ui = build_demo(registry)
    analyses.register(Analysis("log_prob", "Output log-probability", OutputLogProb, output_log_prob, cheap=False))
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", server_port=None,
                            run_history=False, css=CSS)
    try:
        client = Client(url, verbose=False)
        text = f"{SENTENCE}\nTwo men talk on a bench."
        answered = client.predict(text, sentence=2, api_name="/log_prob")
        translation = ui.service.run(Request.from_api(registry, text)).translations[1]
        model = registry.get(registry.default_key).translator.model
        # the served run (maybe our float16 kernel) against a plain teacher-forced pass: float32 rounding
        assert answered["log_prob"] == pytest.approx(teacher_forced_log_prob(model, translation), rel=1e-4)
        with pytest.raises(Exception, match=r"sentence must be in \[1, 2\], got 3"):
            client.predict(text, sentence=3, api_name="/log_prob")
    finally:
        analyses.unregister("log_prob")
        demo.close()


def zeroed_head_copy(model, kind: str, layer: int, head: int):
    """The model with one head's columns of its attention's output projection zeroed: what switching that head
    off does (its output before the projection is zero), made without head masking."""
    zeroed = copy.deepcopy(model)
    zeroed.use_half_weights(False)
    attention = attention_modules(zeroed)[kind][layer]
    size = attention.out_proj.weight.shape[1] // attention.n_heads
    with torch.no_grad():
        attention.out_proj.weight[:, head * size:(head + 1) * size] = 0
    return zeroed


def test_every_analysis_sees_the_results_heads_off_without_handling_them(app):
    ui, _ = app
    analyses.register(Analysis("log_prob", "Output log-probability", OutputLogProb, output_log_prob, cheap=False))
    try:
        off = ui.service.run(Request.from_api(ui.registry, SENTENCE, heads_off="cross 1 2"))  # numbered from 1
        on = ui.service.run(Request.from_api(ui.registry, SENTENCE))
        translation = off.translations[0]
        model = ui.registry.get(off.model_key).translator.model
        zeroed = zeroed_head_copy(model, "cross", 0, 1)
        # an on-demand analysis defined here, asked through the session service
        asked = ui.service.analyse(off, translation, "log_prob").log_prob
        # the service's run (a head mask, maybe our float16 kernel) against a copy with the head's columns zeroed
        # (F.linear): float32 rounding through the layers; ALTI+ and the gradients magnify it, hence looser below
        assert asked == pytest.approx(teacher_forced_log_prob(zeroed, translation), rel=1e-4)
        assert abs(asked - teacher_forced_log_prob(model, translation)) > 1e-3  # the head matters here
        assert ui.service.analyse(on, translation, "log_prob").log_prob == pytest.approx(
            teacher_forced_log_prob(model, translation), rel=1e-4)
        # a cheap built-in one, computed with the translation: ALTI+ of the model with the head zeroed
        reference = alti_plus(zeroed, translation.src_ids, translation.tgt_ids)
        np.testing.assert_allclose(translation.contributions.matrix, reference.matrix, atol=1e-4)
        # an on-demand built-in one, as the attribution view asks it
        reference = input_x_gradient(zeroed, translation.src_ids, translation.tgt_ids).scores
        np.testing.assert_allclose(ui.service.attribute(off, translation).scores, reference, rtol=1e-3, atol=1e-4)
    finally:
        analyses.unregister("log_prob")


def test_an_analysis_gets_what_it_declares_recorded_and_must_return_its_type(app):
    ui, _ = app

    @dataclass
    class EncoderStates:
        layers: int

    def encoder_states(access, translation):
        return EncoderStates(translation.recorded["encoder_hidden"].values.shape[0])

    analyses.register(Analysis("states", "Encoder states", EncoderStates, encoder_states, records=("encoder_hidden",)))
    try:
        request = Request.from_api(ui.registry, SENTENCE)
        translation = run(ui.registry, request, frozenset({"states"})).translations[0]
        config = ui.registry.get(request.model).translator.model.config
        assert translation.analyses["states"].layers == config.n_layers
        assert translation.recorded["encoder_hidden"].values.shape[1:] == (len(translation.src_ids), config.d_model)
        assert "encoder_hidden" not in run(ui.registry, request, frozenset()).translations[0].recorded
        access = ui.service.access(run(ui.registry, request, frozenset()))
        analyses.register(Analysis("states", "Encoder states", EncoderStates, lambda access, t: {"layers": 1}))
        with pytest.raises(TypeError, match="returned dict, not the EncoderStates it declares"):
            run_analysis(access, translation, "states")
    finally:
        analyses.unregister("states")
    with pytest.raises(TypeError, match="result must be a dataclass type"):
        analyses.register(Analysis("loose", "Loose", object, encoder_states))
    with pytest.raises(ValueError, match=r"records \['attention'\]: each must be one of"):
        analyses.register(Analysis("loose", "Loose", EncoderStates, encoder_states, records=("attention",)))


def test_the_default_model_is_read_from_what_is_served(app, monkeypatch, tmp_path):
    ui, _ = app
    served = ui.registry.models
    monkeypatch.delenv(DEFAULT_MODEL_SETTING, raising=False)
    # the first served model that translates from the page's language (English), else the first served one
    assert Registry(dict(served), {}).default_key == "en-de"
    assert Registry({"de-en": served["de-en"]}, {}).default_key == "de-en"
    monkeypatch.setenv(DEFAULT_MODEL_SETTING, "de-en")
    assert Registry(dict(served), {}).default_key == "de-en"
    assert Request.from_api(Registry(dict(served), {}), SENTENCE).model == "de-en"
    monkeypatch.setenv(DEFAULT_MODEL_SETTING, "fr-en")
    shutil.copytree(ROOT / "checkpoints" / "de-en", tmp_path / "de-en")
    with pytest.raises(ValueError, match=rf"{DEFAULT_MODEL_SETTING} must be one of the served models \['de-en'\], "
                                         "got 'fr-en'"):
        discover(tmp_path)
