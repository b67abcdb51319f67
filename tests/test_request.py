"""One typed request: every check in one constructor, a bad value named by its field, and a link that rebuilds it."""
import json
from urllib.parse import parse_qsl

import pytest

from explorer.registry import discover
from explorer.request import MAX_OUTPUT_TOKENS, Request, RequestError
from explorer.share import parse_link

from .conftest import ROOT


@pytest.fixture(scope="module")
def registry():
    return discover(ROOT / "checkpoints")


@pytest.mark.parametrize("arguments, field", [
    ({"text": "  "}, "text"),
    ({"model": "xx-yy"}, "model"),
    ({"device": "tpu"}, "device"),
    ({"strategy": "telepathy"}, "strategy"),
    ({"strategy": "beam", "settings": {"beam_size": 0}}, "beam.beam_size"),
    ({"strategy": "sample", "settings": {"temperature": -1.0}}, "sample.temperature"),
    ({"strategy": "greedy", "settings": {"temperature": 0.5}}, "settings"),  # another strategy's setting
    ({"settings": {"colour": 3}}, "settings"),
    ({"settings": [4]}, "settings"),
    ({"max_length": MAX_OUTPUT_TOKENS + 1}, "max_length"),
    ({"prefix": "x " * 200, "max_length": 3}, "prefix"),
    ({"heads_off": "cross 9 1"}, "heads_off"),
    ({"heads_off": "sideways 1 1"}, "heads_off"),
])
def test_a_bad_value_is_named_by_its_field(registry, arguments, field):
    text = arguments.pop("text", "A dog runs.")
    with pytest.raises(RequestError) as caught:
        Request.from_api(registry, text, **arguments)
    assert caught.value.field == field


def test_only_the_chosen_strategys_settings_are_kept(registry):
    request = Request.from_api(registry, "A dog runs.\n\nA cat sleeps.", strategy="beam", settings={"beam_size": 3})
    recorded = json.loads((ROOT / "checkpoints" / registry.default_key / "metrics.json").read_text())["decoding"]
    # the setting not given is the one the model's metrics.json records (chosen on val), not the strategy's default
    assert request.settings == {"beam_size": 3, "length_penalty": recorded["length_penalty"]}
    assert request.lines == ("A dog runs.", "A cat sleeps.") and request.model == registry.default_key


@pytest.mark.parametrize("model", ["en-de", "de-en"])
def test_a_request_without_decoding_settings_decodes_as_the_model_card_says(registry, model):
    recorded = json.loads((ROOT / "checkpoints" / model / "metrics.json").read_text())["decoding"]
    request = Request.from_api(registry, "A dog runs.", model=model)
    assert {"strategy": request.strategy, **request.settings} == recorded
    sampled = Request.from_api(registry, "A dog runs.", model=model, strategy="sample", settings={"temperature": None})
    assert sampled.settings["temperature"] == 1.0  # another strategy: its own defaults (a constant, exact)


def test_heads_off_text_is_numbered_from_one_and_kept_from_zero(registry):
    request = Request.from_api(registry, "A dog runs.", heads_off="cross 3 2; decoder_self 1 4")
    assert request.heads_off == (("cross", 2, 1), ("decoder_self", 0, 3))
    assert Request.from_api(registry, "A dog runs.", heads_off=[("cross", 2, 1)]).heads_off == (("cross", 2, 1),)


def test_a_link_rebuilds_the_request(registry):
    request = Request.from_api(
        registry,
        "Two dogs play.",
        model="en-de",
        strategy="beam",
        settings={"beam_size": 5, "length_penalty": 1.5},
        max_length=40,
        prefix="Zwei",
        heads_off="cross 3 2",
    )
    params = dict(parse_qsl(request.to_link()))
    assert params["heads_off"] == "cross 3 2" and params["beam_size"] == "5"
    rebuilt, view = parse_link(params, registry)
    assert rebuilt == request
    assert view == {"kind": "cross", "layer": registry.get("en-de").profile.config.n_layers - 1, "head": "mean",
                    "step": None}


def test_a_link_reads_only_the_chosen_strategys_settings(registry):
    """Links made before settings had namespaces held every control; another strategy's value is ignored."""
    rebuilt, _ = parse_link({"text": "A dog.", "strategy": "beam", "beam_size": "3", "temperature": "0.7"}, registry)
    assert rebuilt.strategy == "beam" and rebuilt.settings["beam_size"] == 3 and "temperature" not in rebuilt.settings
    assert "temperature" not in dict(parse_qsl(rebuilt.to_link()))


@pytest.mark.parametrize("params, field", [
    ({"text": "A dog.", "beam_size": "four"}, "beam_size"),
    ({"text": "A dog.", "max_length": "2.5"}, "max_length"),
    ({"text": "A dog.", "layer": "99"}, "layer"),
    ({"text": "A dog.", "kind": "diagonal"}, "kind"),
    ({"text": "A dog.", "colour": "red"}, "link"),
])
def test_a_bad_link_value_is_named(registry, params, field):
    with pytest.raises(RequestError) as caught:
        parse_link(params, registry)
    assert caught.value.field == field and field in str(caught.value)


def test_a_link_carries_the_cause_tabs_inputs_checked(registry):
    _, view = parse_link({"text": "A dog runs.", "cause_corrupted": "<b>A cat</b> runs.", "cause_target": "2",
                          "cause_contrast": "▁Katze"}, registry)
    assert view["cause"] == {"corrupted": "<b>A cat</b> runs.", "target": 2, "contrast": "▁Katze"}  # text, kept
    for params, message in (({"cause_target": "NaN"}, "cause_target in the link must be an integer in"),
                            ({"cause_target": "0"}, r"cause_target in the link must be .*\[1, 128\], got 0"),
                            ({"cause_corrupted": "x" * 5000}, "cause_corrupted has 5,000 characters"),
                            ({"cause_corrupted": "one\ntwo"}, "one sentence on one line")):
        with pytest.raises(RequestError, match=message) as error:
            parse_link({"text": "A dog runs.", **params}, registry)
        assert error.value.field in ("cause_target", "cause_corrupted")
