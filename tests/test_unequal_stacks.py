"""Each stack its own shape: a deep encoder and a shallow decoder with their own head counts and feed-forward widths
(as OPUS-MT's distilled students have), through the configuration, the model, recording, and every view of the page.
The Marian equivalence tests (tests/test_marian.py) hold such a shape equal to Hugging Face's; the compiled step's
(tests/test_fused_step.py) to the Python step's."""
import json

import numpy as np
import pytest
import torch

from explorer.registry import discover
from explorer.request import Request, RequestError
from explorer.share import parse_link
from explorer.shell import build_demo
from explorer.views.attention import attention_figure
from explorer.views.selection import ALL, MEAN, OVERVIEW
from transformer import ModelConfig, Tokenizer, Transformer, expected_parameter_count
from transformer.checkpoint import save_checkpoint
from transformer.core.capture import capture_attention, record
from transformer.decoding.trace import Recorded

from .conftest import tiny_config

# 3 encoder layers of 4 heads (feed-forward 40), 2 decoder layers of 2 heads (feed-forward 24)
OWN_SHAPE = {f"{stack}_{part}" for stack in ("encoder", "decoder") for part in ("layers", "heads", "ff")}
UNEQUAL = dict(encoder_layers=3, encoder_heads=4, encoder_ff=40, decoder_layers=2, decoder_heads=2, decoder_ff=24)


def test_old_configurations_give_both_stacks_the_one_shape():
    old = {"src_vocab_size": 11, "tgt_vocab_size": 11, "d_model": 16, "n_heads": 4, "n_layers": 3, "d_ff": 32}
    config = ModelConfig.from_dict(old)
    assert config.encoder == config.decoder == (3, 4, 32, 4) and config.same_stacks
    assert config.to_dict() == ModelConfig(**old).to_dict() and set(old) < set(config.to_dict())
    assert not set(config.to_dict()) & OWN_SHAPE  # written as before
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_each_stack_keeps_its_own_shape_through_a_save():
    config = tiny_config(**UNEQUAL)
    assert (config.encoder, config.decoder) == ((3, 4, 40, 4), (2, 2, 24, 8)) and not config.same_stacks
    saved = config.to_dict()
    assert set(saved) & OWN_SHAPE == {"encoder_layers", "encoder_ff", "decoder_heads", "decoder_ff"}  # not as n_*
    assert ModelConfig.from_dict(json.loads(json.dumps(saved))) == config
    assert "3 encoder layers (4 heads of size 4, feed-forward 40) + 2 decoder layers" in config.stacks_text()


@pytest.mark.parametrize("overrides, message", [
    ({"decoder_heads": 3}, r"d_model \(16\) must be divisible by decoder_heads \(3\)"),
    ({"n_heads": 3}, r"d_model \(16\) must be divisible by n_heads \(3\)"),
    ({"encoder_layers": 0}, "encoder_layers must be a positive integer, got 0"),
    ({"decoder_ff": 2.5}, "decoder_ff must be a positive integer, got 2.5"),
])
def test_a_bad_stack_shape_is_named(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**overrides)


def test_the_model_has_each_stacks_shape():
    torch.manual_seed(0)
    model = Transformer(tiny_config(**UNEQUAL)).eval()
    assert (len(model.encoder_layers), len(model.decoder_layers)) == (3, 2)
    assert model.encoder_layers[0].feed_forward.fc1.out_features == 40
    assert model.decoder_layers[1].feed_forward.fc1.out_features == 24
    assert model.num_parameters() == expected_parameter_count(model.config)
    src, tgt = torch.randint(4, 11, (2, 6)), torch.randint(4, 11, (2, 5))
    src[1, 4:] = 0
    with torch.no_grad(), capture_attention(model) as att, record(model, ["encoder_hidden", "decoder_hidden"]) as rec:
        logits = model(src, tgt)
    assert att.encoder_self.shape == (3, 2, 4, 6, 6)
    assert att.decoder_self.shape == (2, 2, 2, 5, 5) and att.cross.shape == (2, 2, 2, 5, 6)
    assert rec["encoder_hidden"].shape == (3, 2, 6, 16) and rec["decoder_hidden"].shape == (2, 2, 5, 16)
    for weights in (att.encoder_self, att.decoder_self, att.cross):  # rows of probabilities, masked keys at 0
        torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))  # float32 sums: the defaults
    assert att.cross[:, 1, :, :, 4:].abs().max() == 0
    # the explicit and fused attention paths, and cached step-by-step decoding, compute the same logits; the
    # tolerance is float32 rounding of sums taken in another order
    model.use_fused_attention(False)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), logits, atol=1e-5, rtol=0)
        memory = model.encode(src)
        src_mask = (src != 0)[:, None, None, :]
        cache = model.new_cache()
        steps = [model.decode_step(memory, src_mask, tgt[:, t], cache) for t in range(tgt.size(1))]
    torch.testing.assert_close(torch.stack(steps, dim=1), logits, atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def unequal_page(tokenizer_file, tmp_path_factory):
    """The page, in-process, serving an untrained checkpoint whose encoder and decoder differ in shape."""
    torch.manual_seed(0)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, d_model=32, **UNEQUAL))
    folder = save_checkpoint(tmp_path_factory.mktemp("unequal") / "unequal", model, tokenizer_file)
    _, ui = build_demo(discover(tmp_path_factory.mktemp("none"), [folder]))
    return ui, folder.name


def test_every_view_renders_every_layer_and_head_choice(unequal_page):
    """The page offers the widest stack's layers (3) and heads (4); a view of the decoder's kinds fits a choice
    beyond its stack to its last layer or the mean over its heads."""
    ui, key = unequal_page
    sentence = "a man rides a red bike ."
    first = ui.translate(Request.from_api(ui.registry, sentence, model=key, max_length=8))
    assert [value for _, value in first["layer"]["choices"]] == ["0", "1", "2", OVERVIEW]
    assert [value for _, value in first["head"]["choices"]] == [MEAN, ALL, "0", "1", "2", "3"]
    for kind in ("encoder_self", "decoder_self", "cross"):
        for layer, head in (("2", "3"), ("1", ALL), (OVERVIEW, "1"), ("0", MEAN)):
            named = ui.translate(Request.from_api(ui.registry, sentence, model=key, max_length=8), kind=kind,
                                 layer=layer, head=head)
            assert named["translation"] == first["translation"]
            assert named["attention_plot"] is not None
            for view in ui.views:
                if view.placement == "tab":
                    view.render(named["result"], ui.default_state() | {"kind": kind, "layer": layer, "head": head},
                                ui.context(key), "translation")


def test_heads_and_links_are_checked_against_their_own_stack(unequal_page):
    ui, key = unequal_page
    Request.from_api(ui.registry, "a dog .", model=key, heads_off="encoder_self 3 4; cross 2 2")
    with pytest.raises(RequestError, match="'cross 2 3' is out of range: this model's cross layers are numbered 1-2 "
                                           "and its heads 1-2"):
        Request.from_api(ui.registry, "a dog .", model=key, heads_off="cross 2 3")
    _, view = parse_link({"text": "a dog .", "model": key, "kind": "encoder_self", "layer": "3", "head": "4"},
                         ui.registry)
    assert (view["layer"], view["head"]) == (2, 3)
    with pytest.raises(RequestError, match="layer in the link"):
        parse_link({"text": "a dog .", "model": key, "kind": "cross", "layer": "3"}, ui.registry)


def test_a_large_models_overview_shows_one_tile_per_layer_unless_every_head_is_asked_for():
    """12 layers x 16 heads (NLLB-600M's decoder): 192 tiles would be a few pixels each, so the overview shows each
    layer's chosen head, or the mean over heads, and All heads (tiled) still shows every one."""
    rng = np.random.default_rng(0)
    values = rng.random((12, 16, 3, 4)).astype(np.float32)
    recorded = Recorded("cross", "Cross-attention", values, ("layer", "head", "query", "key"), ["a", "b", "c"],
                        ["w", "x", "y", "z"], "query", "key")

    def tiles(figure):
        return [a.text for a in figure.layout.annotations]

    assert tiles(attention_figure(recorded, OVERVIEW, MEAN, False)) == [f"L{i}" for i in range(1, 13)]
    figure = attention_figure(recorded, OVERVIEW, "3", False)
    assert "head 4" in figure.layout.title.text.replace("<br>", " ")
    canvas = np.array(figure.data[0].z, dtype=float)
    np.testing.assert_allclose(canvas[:3, :4], values[0, 3], atol=1e-3)  # layer 1's tile: head 4's map (rounded)
    assert len(tiles(attention_figure(recorded, OVERVIEW, ALL, False))) == 192
