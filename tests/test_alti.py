"""ALTI+ (analysis/alti.py): the decomposition rebuilds each sub-layer's output exactly, and the contributions
equal a brute-force computation written here with loops over positions and heads, layer by layer."""
import numpy as np
import pytest
import torch

from transformer import Transformer
from transformer.analysis.alti import alti_plus
from transformer.core.capture import capture_attention
from transformer.core.probes import ATTENTION_KINDS
from transformer.tokenizer import BOS_ID

from .conftest import tiny_config

SRC = [5, 7, 3, 9, 2]
TGT = [4, 8, 6, 2]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(7)
    return Transformer(tiny_config(n_layers=2)).eval()


def states(model):
    """Every attention sub-layer's input and output, the encoder's output, and the attention weights."""
    seen, handles = {}, []
    for layer in model.encoder_layers:
        handles.append(layer.attention_residual.register_forward_hook(
            lambda m, i, o, key=("enc", layer): seen.__setitem__(key, (i[0][0].double(), o[0].double()))))
    for layer in model.decoder_layers:
        for name in ("self", "cross"):
            module = getattr(layer, f"{name}_attention_residual")
            handles.append(module.register_forward_hook(
                lambda m, i, o, key=(name, layer): seen.__setitem__(key, (i[0][0].double(), o[0].double()))))
    handles.append(model.encoder_norm.register_forward_hook(lambda m, i, o: seen.__setitem__("memory", o[0].double())))
    with torch.no_grad(), capture_attention(model) as attention:
        model(torch.tensor([SRC]), torch.tensor([[BOS_ID] + TGT[:-1]]))
    for handle in handles:
        handle.remove()
    return seen, attention


def brute_force(attention_module, weights, x_norm, x, y, memory=None):
    """Contributions (Q, K) of one sub-layer with explicit loops: per query i, per key j, per head h. With `memory`,
    a cross-attention: column 0 is the residual, then each source position."""
    w = attention_module.in_proj.weight.double()
    b = attention_module.in_proj.bias.double()
    w_o = attention_module.out_proj.weight.double()
    d, heads = x.shape[1], attention_module.n_heads
    hs = d // heads
    keys_input = x_norm if memory is None else memory
    out = np.zeros((x.shape[0], keys_input.shape[0] + (memory is not None)))
    for i in range(x.shape[0]):
        terms = []
        if memory is not None:
            terms.append(x[i])
        for j in range(keys_input.shape[0]):
            term = torch.zeros(d, dtype=torch.float64)
            for h in range(heads):
                value = (
                    keys_input[j] @ w[2 * d + h * hs : 2 * d + (h + 1) * hs].T
                    + b[2 * d + h * hs : 2 * d + (h + 1) * hs]
                )
                term += weights[h, i, j].double() * (w_o[:, h * hs:(h + 1) * hs] @ value)
            if memory is None and j == i:
                term = term + x[i]
            terms.append(term)
        # the decomposition is exact: the terms and the output bias rebuild the sub-layer's output (y is the model's
        # float32 output: float32 rounding on values of order 1)
        np.testing.assert_allclose(
            (sum(terms) + attention_module.out_proj.bias.double()).numpy(), y[i].numpy(), atol=1e-5
        )
        raw = [max(0.0, float(y[i].abs().sum() - (y[i] - t).abs().sum())) for t in terms]
        out[i] = np.array(raw) / sum(raw)
    return out


@torch.no_grad()
def test_contributions_equal_a_brute_force_rollout(model):
    seen, attention = states(model)
    rollout = np.eye(len(SRC))
    for index, layer in enumerate(model.encoder_layers):
        x, y = seen[("enc", layer)]
        c = brute_force(
            layer.self_attention,
            attention.encoder_self[index, 0],
            layer.attention_residual.norm(x.float()).double(),
            x,
            y,
        )
        rollout = c @ rollout
    rows = np.hstack([np.zeros((len(TGT), len(SRC))), np.eye(len(TGT))])
    source_rows = np.hstack([rollout, np.zeros((len(SRC), len(TGT)))])
    for index, layer in enumerate(model.decoder_layers):
        x, y = seen[("self", layer)]
        rows = (
            brute_force(
                layer.self_attention,
                attention.decoder_self[index, 0],
                layer.self_attention_residual.norm(x.float()).double(),
                x,
                y,
            )
            @ rows
        )
        x, y = seen[("cross", layer)]
        shares = brute_force(layer.cross_attention, attention.cross[index, 0], None, x, y, memory=seen["memory"])
        rows = shares[:, :1] * rows + shares[:, 1:] @ source_rows
    result = alti_plus(model, SRC, TGT)
    # float64 on both sides (alti_plus's default): only the order of float64 sums differs (~1e-16 relative), so
    # 1e-8 and 1e-9 leave room and still fail on any slip in the rollout
    np.testing.assert_allclose(result.matrix, rows, atol=1e-8)
    np.testing.assert_allclose(result.matrix.sum(1), 1, atol=1e-9)
    np.testing.assert_allclose(result.source_share, rows[:, : len(SRC)].sum(1), atol=1e-9)
    assert ((result.source_share > 0) & (result.source_share < 1)).all()
    # a prediction draws on no decoder input after its own position (the causal mask)
    assert np.allclose(np.triu(result.matrix[:, len(SRC):], k=1), 0)  # zero up to float64 rounding (atol 1e-8)


def test_a_post_norm_model_is_refused():
    model = Transformer(tiny_config(norm="post")).eval()
    with pytest.raises(ValueError, match="pre-norm"):
        alti_plus(model, SRC, TGT)


def test_in_float32_as_the_app_runs_it_the_contributions_stay_within_1e_5_of_float64(model):
    exact = alti_plus(model, SRC, TGT)
    fast = alti_plus(model, SRC, TGT, dtype=torch.float32)
    assert fast.matrix.dtype == np.float32 and exact.matrix.dtype == np.float64
    # float32 rounding (~1.2e-7 relative) carried through the rollout's products of shares <= 1
    np.testing.assert_allclose(fast.matrix, exact.matrix, atol=1e-5)
    np.testing.assert_allclose(fast.layers, exact.layers, atol=1e-5)


@pytest.mark.parametrize(
    "settings",
    [
        dict(strategy="greedy"),
        dict(strategy="beam", beam_size=3),
        dict(strategy="beam", beam_size=2, heads_off=[("cross", 1, 0), ("decoder_self", 0, 3)]),
    ],
)
def test_a_translation_reads_its_own_recorded_attention_as_the_pass_would(random_translator, settings):
    """add_contributions takes the weights decoding recorded instead of recording the pass's own: within float32
    rounding of alti_plus's float64 pass, for greedy and beam search (whose maps are traced back to the winner) and
    with heads switched off (their weights are recorded but move nothing)."""
    from transformer.analysis.alti import add_contributions

    translation = random_translator.translate("a man rides a red bike .", capture=True, max_length=12, **settings)
    add_contributions(random_translator.model, translation, torch.float32)
    reference = alti_plus(random_translator.model, translation.src_ids, translation.tgt_ids,
                          translation.settings.get("heads_off") or None, torch.float64)
    # float32 (and the decoding's own float32 weights) against float64: shares <= 1 within 2e-5; the norms, of order
    # 1-10, within 1e-4 relative
    np.testing.assert_allclose(translation.contributions.layers, reference.layers, atol=2e-5)
    for kind, norms in reference.norms.items():
        np.testing.assert_allclose(translation.norms[kind], norms, rtol=1e-4, atol=1e-5)
    recorded = translation.recorded["cross"].values
    if settings.get("heads_off"):  # the recorded maps themselves are left as decoding recorded them
        assert recorded[1, 0].any()


@pytest.mark.parametrize("settings", [dict(strategy="greedy"), dict(strategy="beam", beam_size=3),
                                      dict(strategy="beam", beam_size=2, heads_off=[("encoder_self", 0, 1)])])
def test_a_translation_reads_the_encoder_decoding_ran_and_runs_the_decoder_alone(random_translator, settings,
                                                                                  monkeypatch):
    """With the encoder states decoding recorded (what the app records for ALTI+), the pass runs no encoder: the
    contributions and norms equal alti_plus's own whole float64 pass, heads switched off in the encoder included."""
    from transformer.analysis.alti import ENCODER_STATES, add_contributions

    model = random_translator.model
    translation = random_translator.translate("a man rides a red bike .", record=ATTENTION_KINDS + ENCODER_STATES,
                                              max_length=12, **settings)
    reference = alti_plus(model, translation.src_ids, translation.tgt_ids,
                          translation.settings.get("heads_off") or None, torch.float64)
    encodes = []
    monkeypatch.setattr(model, "encode", lambda *a, **k: encodes.append(a) or pytest.fail("the encoder ran again"))
    add_contributions(model, translation, torch.float32)
    assert not encodes
    # float32 and the decoding's own float32 states against float64 (as the test above)
    np.testing.assert_allclose(translation.contributions.layers, reference.layers, atol=2e-5)
    for kind, norms in reference.norms.items():
        np.testing.assert_allclose(translation.norms[kind], norms, rtol=1e-4, atol=1e-5)
