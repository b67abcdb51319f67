"""The one recording mechanism (transformer/core/probes.py, capture.py): each module declares its points, a point is
named by its module path, short names find the same points, and nothing is computed unless a recording listens."""
import math

import pytest
import torch
import torch.nn.functional as F

from transformer import Transformer, record
from transformer.core import attention
from transformer.core.probes import SITES, Tap, at_layer, pattern, recordable

from .conftest import tiny_config

UNEQUAL = dict(encoder_layers=3, encoder_heads=4, encoder_ff=40, decoder_layers=2, decoder_heads=2, decoder_ff=24)


@pytest.fixture
def model():
    torch.manual_seed(0)
    return Transformer(tiny_config(**UNEQUAL)).eval()


def batch():
    torch.manual_seed(1)
    src, tgt = torch.randint(4, 11, (2, 6)), torch.randint(4, 11, (2, 5))
    src[1, 4:] = 0
    return src, tgt


def test_every_point_is_named_by_its_module_path_and_declared_by_its_owner(model):
    paths = dict(model.named_modules())
    taps = [(path, m) for path, m in paths.items() if isinstance(m, Tap)]
    assert taps and all(m.name == path for path, m in taps)
    for path, point in taps:
        owner, _, attribute = path.rpartition(".")
        assert attribute in type(paths[owner]).records  # no Tap without a declaration
    for owner in paths.values():  # and no declaration without its Tap
        for attribute in getattr(type(owner), "records", {}):
            assert isinstance(getattr(owner, attribute), Tap)
    names = recordable(model)
    assert len(names) == len(taps)
    # each stack its own depth: the layer is in the name
    assert [n for n in names if n.endswith(".self_attention.weights")] == [
        *(f"encoder_layers.{i}.self_attention.weights" for i in range(3)),
        *(f"decoder_layers.{i}.self_attention.weights" for i in range(2))]


def test_every_site_finds_one_module_per_layer(model):
    for site, path in SITES.items():
        layers = len(model.encoder_layers if path.startswith("encoder") else model.decoder_layers)
        modules = [name for name, _ in model.named_modules() if name.count(".") == path.count(".")
                   and name.split(".")[0] == path.split(".")[0] and name.endswith(path.split("*")[1])]
        assert len(modules) == layers, site


def test_a_point_in_one_layer_holds_that_layers_numbers(model):
    """Layer 1's cross-attention weights, recorded by path, by short name and by probe, equal a softmax computed here
    from that layer's own projection weights, its recorded input and the encoder's output."""
    src, tgt = batch()
    one = at_layer("cross.weights", 1)
    assert one == "decoder_layers.1.cross_attention.weights"
    with torch.no_grad(), record(model, [one, "cross", "cross_residual.normed", "encoder_final"]) as rec:
        model(src, tgt)
    layer = model.decoder_layers[1].cross_attention
    normed, memory = rec["cross_residual.normed"][1], rec["encoder_final"][0]  # (B, T, D), (B, S, D)
    d, heads = model.config.d_model, model.config.decoder.heads
    w, b = layer.in_proj.weight, layer.in_proj.bias
    q = (normed @ w[:d].T + b[:d]).view(2, 5, heads, -1).transpose(1, 2)  # (B, H, T, hs)
    k = (memory @ w[d:2 * d].T + b[d:2 * d]).view(2, 6, heads, -1).transpose(1, 2)  # (B, H, S, hs)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d // heads)).masked_fill((src == 0)[:, None, None, :], -math.inf)
    # products of 4-wide head vectors summed in another order than the model's: float32 rounding
    torch.testing.assert_close(rec[one][0], scores.softmax(-1), atol=1e-6, rtol=0)
    assert torch.equal(rec[one][0], rec["cross"][1])


def test_the_feed_forward_hidden_units_of_each_layer(model):
    src, tgt = batch()
    with torch.no_grad(), record(model, ["encoder_ff.hidden", "encoder_ff_residual.normed"]) as rec:
        model(src, tgt)
    hidden = rec["encoder_ff.hidden"]
    assert hidden.shape == (3, 2, 6, 40)
    for i, layer in enumerate(model.encoder_layers):
        fc1 = layer.feed_forward.fc1
        expected = torch.relu(rec["encoder_ff_residual.normed"][i] @ fc1.weight.T + fc1.bias)
        torch.testing.assert_close(hidden[i], expected, atol=1e-6, rtol=0)  # float32 rounding of the products


def test_short_names_expand_to_paths():
    assert pattern("cross") == "decoder_layers.*.cross_attention.weights"
    assert pattern("encoder_hidden") == "encoder_layers.*.output"
    assert pattern("decoder_ff.hidden") == "decoder_layers.*.feed_forward.hidden"
    assert pattern("logits") == "logits"


def test_nothing_is_computed_unless_a_recording_listens(model, monkeypatch):
    calls = []

    def counted(function):
        def wrapper(*args, **kwargs):
            calls.append(function.__name__)
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(attention, "transported_norms", counted(attention.transported_norms))
    monkeypatch.setattr(attention, "explicit_attention", counted(attention.explicit_attention))
    src, tgt = batch()
    with torch.no_grad():
        model(src, tgt)
        assert calls == []  # the fused path, no norms
        with record(model, ["cross.transported"]) as rec:
            model(src, tgt)
        assert calls == ["transported_norms"] * 2  # the two cross-attention layers, and still the fused path
        assert rec["cross.transported"].shape == (2, 2, 2, 6)
        calls.clear()
        with record(model, [at_layer("encoder_self", 2)]):
            model(src, tgt)
        assert calls == ["explicit_attention"]  # only the listened layer leaves the fused path


def test_a_name_that_finds_nothing_is_refused_with_examples(model):
    with pytest.raises(ValueError, match=r"records nothing named 'cross\.nonsense'.*encoder_layers\.0\."):
        with record(model, ["cross.nonsense"]):
            pass
    assert all(not m._forward_hooks for m in model.modules())


def test_explicit_attention_matches_the_fused_path():
    q, k, v = (torch.randn(2, 3, 4, 5) for _ in range(3))
    mask = torch.ones(2, 1, 1, 4, dtype=torch.bool)
    mask[1, ..., 3] = False
    out, probabilities = attention.explicit_attention(q, k, v, mask)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6, rtol=0)
    assert probabilities[1, ..., 3].abs().max() == 0


def test_the_recipe_for_a_recorded_quantity(monkeypatch, tokenizer_file):
    """docs/architecture.md's "A recorded quantity", followed: one `records` entry and one `tap` line in the module
    that computes it (here a feed-forward block that also declares its units before the activation), then one
    `Probe` entry; the point is named by its path, found by its site's short name, and decoding assembles it per
    sentence, equal to x W1 + b1 computed here from a teacher-forced recording of the block's input."""
    from transformer import Tokenizer, Translator
    from transformer.core import layers, probes
    from transformer.core.half_linear import project

    class FeedForwardWithGate(layers.FeedForward):
        records = {**layers.FeedForward.records, "gate": "the units before the activation, (B, T, F)"}

        def forward(self, x):
            gate = project(x, self.fc1)
            probes.tap(self.gate, gate)
            hidden = self.activation(gate)
            probes.tap(self.hidden, hidden)
            return project(hidden, self.fc2)

    monkeypatch.setattr(layers, "FeedForward", FeedForwardWithGate)
    monkeypatch.setitem(probes.PROBES, "decoder_gate", probes.Probe(
        "decoder_gate", "decoder_ff.gate", "Decoder feed-forward units before the activation", probes.DECODER, 0, None,
        ("layer", "position", "feature"), False, "position: the token it predicted", "unit"))
    tokenizer = Tokenizer.load(tokenizer_file)
    torch.manual_seed(3)
    model = Transformer(tiny_config(tokenizer.vocab_size, d_ff=24, decoder_layers=3)).eval()
    assert "decoder_layers.2.feed_forward.gate" in recordable(model)
    translation = Translator(model, tokenizer).translate("a man rides a bike", max_length=5, record=["decoder_gate"])
    gate = translation.recorded["decoder_gate"].values  # (L, T, F), one row per decoding step
    steps = len(translation.tgt_ids)
    assert gate.shape == (3, steps, 24)
    src = torch.tensor([translation.src_ids])
    tgt = torch.tensor([[model.config.decoder_start_id] + translation.tgt_ids[:-1]])
    with torch.no_grad(), record(model, ["decoder_ff_residual.normed"]) as rec:
        model(src, tgt)
    for layer in range(3):
        fc1 = model.decoder_layers[layer].feed_forward.fc1
        expected = rec["decoder_ff_residual.normed"][layer, 0] @ fc1.weight.T + fc1.bias  # (T, F)
        # step by step against teacher-forced: other sums, float32 rounding through three layers
        torch.testing.assert_close(torch.from_numpy(gate[layer]), expected, atol=1e-5, rtol=1e-5)
