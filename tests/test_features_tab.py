"""The Features tab's handlers (explorer/views/features.py) on the shipped en-de model and its dictionaries, each
against an independent computation: each token's latents are the dictionary's encoding, written out here, of the
point's vectors recorded by hand; Turn it off translates as a hand-written forward hook that takes the latent out;
the share link's features keys are checked like every other key; the saved file holds the tab and loads nothing; the
tab's first open, with its controls as the page holds them, shows no latent and its link (the page's script, run
under Node) carries none."""
import json
import re
import shutil
import subprocess

import gradio as gr
import pytest
import torch

from transformer.core.capture import record
from transformer.features import load_dictionary

from .conftest import ROOT
from .test_feature_steering import hand_edit, layer_of

SENTENCE = "The boat is on the river."  # docs/features.md's worked example
POINT, LATENT = "encoder_layers.3.output", 3964


@pytest.fixture(scope="module")
def tab():
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.shell import build_demo
    from explorer.views import features

    _, ui = build_demo(discover(ROOT / "checkpoints"))
    result = ui.translate(Request.build(ui.registry, SENTENCE, "en-de"), only=ui.first_screen)["result"]
    view = next(v for v in ui.views if v.name == "features")
    return ui, result, view, features


def state(**given) -> dict:
    return {"sentence": 0, "features_point": POINT, "features_latent": None, "features_scale": None} | given


def test_the_model_s_dictionaries_are_offered_last_encoder_layer_first(tab):
    ui, result, view, _ = tab
    offered = view.render(result, state(features_point=None), ui.context("en-de"), "model")["features_point"]
    folders = sorted(p.name for p in (ROOT / "checkpoints" / "en-de" / "features").iterdir())
    assert sorted(offered["choices"]) == folders and offered["value"] == POINT
    kept = view.render(result, state(features_point="decoder_layers.3.output"), ui.context("en-de"), "model")
    assert "value" not in kept["features_point"] and "features_tokens" not in kept  # a point chosen stays, drawn


def test_each_token_s_latents_are_the_encoding_of_the_vectors_recorded_by_hand(tab):
    ui, result, view, _ = tab
    translation = result.translations[0]
    named = view.render(result, state(), ui.context("en-de"), "translation")
    cards = re.findall(r'<li class="ae-token">(.*?)</li>', named["features_tokens"])
    saved = load_dictionary(ROOT / "checkpoints" / "en-de" / "features" / POINT)
    model, d = ui.registry.get("en-de").translator.model, saved.dictionary
    with torch.no_grad(), record(model, POINT) as recording:
        model.encode(torch.tensor([translation.src_ids]))
        x = recording[POINT][0][0].float()  # (S, D)
        pre = (x - d.b_dec) @ d.W_enc + d.b_enc  # the TopK autoencoder's encoder, written out
        kth = pre.topk(d.config.k, dim=-1).values[:, -1:]
        z = torch.where(pre >= kth, pre.relu(), torch.zeros_like(pre))
    assert len(cards) == len(translation.src_ids)
    for position, card in enumerate(cards):
        want = sorted((-float(z[position, j]), j) for j in torch.nonzero(z[position] > 0).flatten().tolist())[:3]
        assert [int(j) for j in re.findall(r'data-latent="(\d+)"', card)] == [j for _, j in want], position
        shown = [float(v) for v in re.findall(r'ae-value">([0-9.]+)<', card)]
        assert shown == pytest.approx([-v for v, _ in want], abs=0.006)  # two decimals shown


def test_turn_it_off_translates_as_a_hand_written_hook(tab):
    ui, result, view, features = tab
    c = ui.components
    steered = features.steered_now(ui, c, 0.0, result, 0, POINT, LATENT, None)
    translator = ui.registry.get("en-de").translator
    saved = load_dictionary(ROOT / "checkpoints" / "en-de" / "features" / POINT)
    hook = layer_of(translator.model, POINT).register_forward_hook(hand_edit(saved, LATENT, 0.0))
    try:
        by_hand = translator.translate(SENTENCE, strategy="greedy").text
    finally:
        hook.remove()
    before = translator.translate(SENTENCE, strategy="greedy").text
    table = steered[c["features_steered"]]
    rows = [re.sub(r"<[^>]+>", "", row) for row in re.findall(r"<td>(.*?)</td>", table)]
    assert rows == [before, by_hand] and before != by_hand  # the docs' example: the latent changes the verb
    assert steered[c["features_scale"]] == "0"  # the box shows the multiple used
    typed = features.steered_now(ui, c, None, result, 0, POINT, f" {LATENT} ", "0")  # the boxes' text, as typed
    assert typed[c["features_steered"]] == table
    with pytest.raises(Exception, match="Latent must be in"):
        features.steered_now(ui, c, 0.0, result, 0, POINT, 4096, None)
    with pytest.raises(Exception, match="Latent must be an integer in \\[0, 4095\\], got '3.5'"):
        features.steered_now(ui, c, 0.0, result, 0, POINT, "3.5", None)
    with pytest.raises(Exception, match="Multiple must be a number in .*, got 'nan'"):
        features.steered_now(ui, c, None, result, 0, POINT, str(LATENT), "nan")
    with pytest.raises(Exception, match="Multiple"):
        features.steered_now(ui, c, None, result, 0, POINT, LATENT, None)
    with pytest.raises(Exception, match="Dictionary"):
        features.steered_now(ui, c, 0.0, result, 0, "decoder_layers.9.output", LATENT, None)


def test_a_latent_s_page_and_the_saved_file(tab):
    ui, result, view, features = tab
    named = view.render(result, state(features_latent=LATENT, features_scale=0.0), ui.context("en-de"), "translation")
    assert f"<h3>Latent {LATENT}:" in named["features_about"] and "<mark>" in named["features_about"]
    counts = named["features_histogram"].data[0].y
    assert sum(counts) == int(re.search(r"Active on ([0-9,]+) of", named["features_about"]).group(1).replace(",", ""))
    assert "steered" in named["features_steered"]
    path = features.saved_file(ui, result, state(features_latent=LATENT, features_scale=0.0))
    page = open(path, encoding="utf-8").read()
    assert f"Latent {LATENT}" in page and "Das Boot" in page and "Plotly" in page
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']?https?:""", page)  # opens offline


@pytest.mark.parametrize("params, named", [
    ({"features_point": "encoder_layers.9.output"}, "features_point"),
    ({"features_point": POINT, "features_latent": "4096"}, "features_latent"),
    ({"features_point": POINT, "features_latent": "-1"}, "features_latent"),
    ({"features_point": POINT, "features_scale": "101"}, "features_scale"),
    ({"features_point": POINT, "features_scale": "nan"}, "features_scale"),
    ({"features_latent": "3"}, "features_point"),
])
def test_the_share_link_s_features_keys_are_checked(tab, params, named):
    from explorer.request import RequestError
    from explorer.share import parse_link

    ui = tab[0]
    with pytest.raises(RequestError) as raised:
        parse_link({"text": SENTENCE, "model": "en-de", **params}, ui.registry)
    assert raised.value.field == named and named in str(raised.value)


def test_a_share_link_restores_the_tab_s_state(tab):
    from explorer.share import parse_link

    ui = tab[0]
    _, view = parse_link({"text": SENTENCE, "model": "en-de", "features_point": POINT, "features_latent": "3964",
                          "features_scale": "2.5"}, ui.registry)
    assert view["features"] == {"features_point": POINT, "features_latent": 3964, "features_scale": 2.5}


NODE = shutil.which("node")


def shown(component):
    """A control's value on the page before anyone touches it, as the page shows and sends it: its configured value,
    but 0 for a gr.Number configured without one (Gradio 6.31's Number front end sets `value ??= 0` as it mounts)."""
    return 0 if isinstance(component, gr.Number) and component.value is None else component.value


def link_from_browser(js: str, values: list, fields: dict) -> str:
    """The share link the page's Copy link script (share.py's LINK_JS) makes of the request controls' `values`, with
    the page's other inputs `fields` (selector -> the input's text), run under Node with a stand-in document."""
    program = ("const [js, values, fields] = JSON.parse(process.argv[1]);"
               "globalThis.document = {querySelector: (s) => s in fields ? {value: fields[s]} : null};"
               "globalThis.window = {location: {origin: 'http://page', pathname: '/'}, history: {replaceState() {}}};"
               "Object.defineProperty(globalThis, 'navigator', {value: {}, configurable: true});"
               "process.stdout.write((0, eval)('(' + js + ')')(...values));")
    done = subprocess.run([NODE, "-e", program, json.dumps([js, values, fields], default=str)], capture_output=True,
                          text=True, timeout=60, check=True)
    return done.stdout


@pytest.mark.skipif(NODE is None, reason="node missing (scripts/test.sh installs it)")
def test_the_first_open_shows_no_latent_and_its_link_carries_none(tab):
    """The tab opened for the first time (its own event, with its controls as the page holds them before anyone
    chooses a latent) shows the latents to choose from, no latent's page and no steering, and Copy link then makes a
    link without the tab's keys; a latent typed in its box does go into the link."""
    from explorer.request import Request

    ui, _, view, _ = tab
    c = ui.components
    result = ui.translate(Request.build(ui.registry, SENTENCE, "en-de"), only=ui.first_screen)["result"]
    (opened,) = [fn for fn in ui.demo.fns.values()
                 if (ui.tabs["features"]._id, "select") in fn.targets and c["features_tokens"] in fn.outputs]
    state = ui.default_state() | {name: c[name].preprocess(shown(c[name])) for name in view.controls}
    drawn = opened.fn(result, *[state[name] for name in ui.state_names])
    texts = {name: drawn[c[name]] for name in ("features_tokens", "features_about", "features_steered")}
    assert re.findall(r'class="ae-latent" data-latent="\d+"', texts["features_tokens"])  # latents to choose from
    assert not any(re.search(r"Latent \d", text) for text in texts.values()), texts
    assert drawn[c["features_histogram"]] is None and texts["features_about"] == texts["features_steered"] == ""
    (copy,) = [fn for fn in ui.demo.fns.values() if (c["copy_link"]._id, "click") in fn.targets]
    fields = {f"#features-{name} input": "" if shown(c[f"features_{name}"]) is None else str(shown(
        c[f"features_{name}"])) for name in ("point", "latent", "scale")}
    values = [component.value for component in copy.inputs]
    link = link_from_browser(copy.js, values, fields)
    assert "model=en-de" in link and "features_" not in link, link
    chosen = link_from_browser(copy.js, values, fields | {"#features-latent input": str(LATENT)})
    assert f"features_point={POINT}&features_latent={LATENT}" in chosen, chosen
