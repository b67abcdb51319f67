"""The Features tab's handlers (explorer/views/features.py) on the shipped en-de model and its dictionaries, each
against an independent computation: each token's latents are the dictionary's encoding, written out here, of the
point's vectors recorded by hand; Turn it off translates as a hand-written forward hook that takes the latent out;
the share link's features keys are checked like every other key; the saved file holds the tab and loads nothing."""
import re

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
    assert steered[c["features_scale"]] == 0.0
    with pytest.raises(Exception, match="Latent must be in"):
        features.steered_now(ui, c, 0.0, result, 0, POINT, 4096, None)
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
