"""Norm-based attention (analysis/norms.py): ‖f_h(x_j)‖ against value vectors rebuilt in this test from the
recorded layer outputs and the weights, and ‖α f(x)‖ against an einsum over the whole vectors."""
import numpy as np
import pytest
import torch

from transformer import Transformer
from transformer.analysis.norms import add_norms, transported_norms, weighted_norms
from transformer.core.capture import record
from transformer.core.head_mask import heads_masked
from transformer.tokenizer import BOS_ID

from .conftest import tiny_config

SRC = [5, 7, 3, 9, 2]  # ends with </s>
TGT = [4, 8, 6, 2]


def value_vectors(attention, x):
    """(heads, keys, D): each head's value vector of each position of x (keys, D), through its columns of the
    output projection, written out here from the weights."""
    d, heads = x.size(-1), attention.n_heads
    w_v, b_v = attention.in_proj.weight[2 * d:], attention.in_proj.bias[2 * d:]
    values = (x @ w_v.T + b_v).view(x.size(0), heads, d // heads)  # (keys, H, hs)
    w_o = attention.out_proj.weight.view(d, heads, d // heads)  # (D, H, hs)
    return torch.stack([values[:, h] @ w_o[:, h].T for h in range(heads)])


def independent_vectors(model, src_ids, tgt_ids):
    """kind -> (layers, heads, keys, D), from each layer's input (recorded outputs of the layer before) normalised
    as a pre-norm layer does, and the encoder's normalised output for the cross-attention."""
    src, tgt = torch.tensor([src_ids]), torch.tensor([[BOS_ID] + tgt_ids[:-1]])
    with torch.no_grad(), record(model, ["encoder_hidden", "decoder_hidden"]) as rec:
        model(src, tgt)
        encoder_in = [model.embed(src, model.src_embed)[0]] + list(rec["encoder_hidden"][:-1, 0])
        decoder_in = [model.embed(tgt, model.tgt_embed)[0]] + list(rec["decoder_hidden"][:-1, 0])
        memory = model.encoder_norm(rec["encoder_hidden"][-1, 0])
        vectors = {"encoder_self": [], "decoder_self": [], "cross": []}
        for layer, x in zip(model.encoder_layers, encoder_in):
            vectors["encoder_self"].append(value_vectors(layer.self_attention, layer.attention_residual.norm(x)))
        for layer, x in zip(model.decoder_layers, decoder_in):
            vectors["decoder_self"].append(value_vectors(layer.self_attention, layer.self_attention_residual.norm(x)))
            vectors["cross"].append(value_vectors(layer.cross_attention, memory))
    return {kind: torch.stack(v).numpy() for kind, v in vectors.items()}


@pytest.fixture
def model():
    torch.manual_seed(3)
    return Transformer(tiny_config(n_layers=2)).eval()


def test_transported_norms_are_the_norms_of_the_value_vectors(model):
    norms = transported_norms(model, SRC, TGT)
    vectors = independent_vectors(model, SRC, TGT)
    for kind, v in vectors.items():  # other products than the model's over float32 vectors: float32 rounding
        assert norms[kind].shape == v.shape[:3]
        np.testing.assert_allclose(norms[kind], np.linalg.norm(v, axis=-1), rtol=1e-5, atol=1e-6)


def test_weighted_norms_are_the_norms_of_the_weighted_vectors(model):
    vectors = independent_vectors(model, SRC, TGT)["cross"]  # (L, H, S, D)
    weights = np.random.default_rng(0).dirichlet(np.ones(len(SRC)), size=(2, 4, len(TGT)))  # (L, H, T, S)
    expected = np.linalg.norm(np.einsum("lhqk,lhkd->lhqkd", weights, vectors), axis=-1)
    np.testing.assert_allclose(  # ||w v|| = w ||v||, the two sides rounded otherwise: float32 rounding
        weighted_norms(weights, np.linalg.norm(vectors, axis=-1)), expected, rtol=1e-5, atol=1e-6
    )


def test_a_translations_norms_are_those_it_was_made_with(random_translator):
    """Decoded with heads off, the norms come from a pass with the same heads off, and the keys match the
    recorded attention's."""
    off = [("encoder_self", 0, 1), ("decoder_self", 1, 2)]
    translation = random_translator.translate("a b c", capture=True, heads_off=off, max_length=6)
    add_norms(random_translator.model, translation)
    for kind in ("encoder_self", "decoder_self", "cross"):
        layers, heads, _, keys = translation.recorded[kind].values.shape
        assert translation.norms[kind].shape == (layers, heads, keys)
    with heads_masked(random_translator.model, off):
        masked = independent_vectors(random_translator.model, translation.src_ids, translation.tgt_ids)
    unmasked = transported_norms(random_translator.model, translation.src_ids, translation.tgt_ids)
    np.testing.assert_allclose(  # the translation's own pass against the rebuild: float32 rounding, as above
        translation.norms["cross"], np.linalg.norm(masked["cross"], axis=-1), rtol=1e-5, atol=1e-6
    )
    assert not np.allclose(translation.norms["cross"], unmasked["cross"])  # the switched-off heads changed them
