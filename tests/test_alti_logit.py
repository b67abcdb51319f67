"""ALTI-Logit of the log-odds (analysis/alti_logit.py): its parts add up to the model's own log-odds, each part equals
a brute-force computation written here with loops over layers, heads and positions, a switched-off head carries
nothing, and on the shipped model the source word behind a choice is the one that decides it."""
import numpy as np
import pytest
import torch

from transformer import Transformer, Translator
from transformer.analysis.alti import alti_plus, rollout
from transformer.analysis.alti_logit import alti_logit
from transformer.core.head_mask import heads_masked
from transformer.tokenizer import BOS_ID

from .conftest import SHIPPED, tiny_config

SRC = [5, 7, 3, 9, 2]
TGT = [4, 8, 6, 11, 2]
STEP, FOIL = 3, 10


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(3)
    return Transformer(tiny_config(vocab_size=16, n_layers=2)).eval()


def log_odds(model, step, foil, heads_off=None):
    with torch.no_grad(), heads_masked(model, heads_off):
        logits = model(torch.tensor([SRC]), torch.tensor([[BOS_ID] + TGT[:step]]))[0, -1].double()
    return float(logits.log_softmax(-1)[TGT[step]] - logits.log_softmax(-1)[foil])


@torch.no_grad()
def brute_force(model, step, foil):
    """The scores with explicit loops: per layer, head and key, the vector each head moved into the step's stream,
    its share of the log-odds through the final LayerNorm held linear, then spread over the inputs by ALTI+'s
    proportions (from rollout(), which tests/test_alti.py checks against its own brute force)."""
    traced = rollout(model, SRC, TGT[: step + 1])
    source, d = len(SRC), model.config.d_model
    hs = d // model.config.n_heads
    final = traced.seen[model.decoder_layers[-1].feed_forward_residual][1][step]
    norm = model.decoder_norm
    sigma = float(torch.sqrt(((final - final.mean()) ** 2).mean() + norm.eps))
    w = model.generator.weight.double()
    direction = (w[TGT[step]] - w[foil]) * norm.weight.double() / sigma

    def share(v):
        return float((v - v.mean()) @ direction)

    scores = np.zeros(source + step + 1)
    scores[source + step] += share(traced.seen[model.decoder_layers[0].self_attention_residual][0][step])
    for index, layer in enumerate(model.decoder_layers):
        for kind, attention, residual, rows in (
                ("decoder_self", layer.self_attention, layer.self_attention_residual, traced.before[index]),
                ("cross", layer.cross_attention, layer.cross_attention_residual, traced.from_source)):
            x = traced.seen[residual][0]
            keys_input = residual.norm(x.float()).double() if kind == "decoder_self" else traced.seen["memory"]
            weights = traced.weights[kind][index, 0].double()  # (H, Q, K)
            w_in, b_in = attention.in_proj.weight.double(), attention.in_proj.bias.double()
            w_out = attention.out_proj.weight.double()
            for k in range(keys_input.shape[0]):
                moved = torch.zeros(d, dtype=torch.float64)
                for h in range(model.config.n_heads):
                    rows_h = slice(2 * d + h * hs, 2 * d + (h + 1) * hs)
                    value = keys_input[k] @ w_in[rows_h].T + b_in[rows_h]
                    moved += weights[h, step, k] * (w_out[:, h * hs:(h + 1) * hs] @ value)
                for j in range(source + step + 1):
                    scores[j] += share(moved) * float(rows[k, j])
        x, y = traced.seen[layer.feed_forward_residual]
        for j in range(source + step + 1):
            scores[j] += share(y[step] - x[step]) * float(traced.after[index][step, j])
    return scores


@pytest.fixture(scope="module")
def rms_model():
    """T5's arithmetic: RMS norms (no centring, no beta), relative positions, gated GELU, no 1/sqrt(hs)."""
    torch.manual_seed(3)
    return Transformer(tiny_config(vocab_size=16, n_layers=2, norm_kind="rms", pos_encoding="relative",
                                   gated_ff=True, activation="gelu_tanh", attention_scale=False)).eval()


@pytest.mark.parametrize("name", ["model", "rms_model"])
def test_the_parts_add_up_to_the_models_own_log_odds(name, request):
    model = request.getfixturevalue(name)
    result = alti_logit(model, SRC, TGT, STEP, FOIL)
    # alti_logit runs in float64, log_odds reads the model's float32 logits: float32 rounding on log-odds of order 1
    assert result.log_odds == pytest.approx(log_odds(model, STEP, FOIL), abs=1e-5)
    # the parts add up by construction, in float64: only float64 rounding (~1e-16 relative) separates them
    assert result.source.sum() + result.prefix.sum() + result.biases == pytest.approx(result.log_odds, abs=1e-9)
    assert result.source.shape == (len(SRC),) and result.prefix.shape == (STEP + 1,)


@pytest.mark.parametrize("step, foil", [(0, 10), (STEP, FOIL), (4, 3)])
def test_each_score_equals_the_brute_force_computation(model, step, foil):
    result = alti_logit(model, SRC, TGT, step, foil)
    # float64 on both sides, sums in other orders: float64 rounding, far below 1e-9
    np.testing.assert_allclose(np.concatenate([result.source, result.prefix]), brute_force(model, step, foil),
                               atol=1e-9)


def test_with_every_cross_attention_head_off_the_source_carries_nothing(model):
    off = [("cross", layer, head) for layer in range(model.config.n_layers) for head in range(model.config.n_heads)]
    result = alti_logit(model, SRC, TGT, STEP, FOIL, heads_off=off)
    np.testing.assert_allclose(result.source, 0, atol=1e-12)  # silent heads: zero up to float64 rounding
    assert result.log_odds == pytest.approx(log_odds(model, STEP, FOIL, off), abs=1e-5)  # float32 logits, as above
    assert result.prefix.sum() + result.biases == pytest.approx(result.log_odds, abs=1e-9)
    assert np.abs(alti_logit(model, SRC, TGT, STEP, FOIL).source).max() > 1e-3  # and with them on, it does


def test_alti_plus_with_every_cross_attention_head_off_gives_the_source_no_share(model):
    off = [("cross", layer, head) for layer in range(model.config.n_layers) for head in range(model.config.n_heads)]
    # silent heads move nothing: zero up to float64 rounding
    np.testing.assert_allclose(alti_plus(model, SRC, TGT, off).source_share, 0, atol=1e-12)
    assert alti_plus(model, SRC, TGT).source_share.min() > 1e-3


def test_bad_steps_and_foils_are_refused(model):
    with pytest.raises(ValueError, match="step must be in"):
        alti_logit(model, SRC, TGT, len(TGT), FOIL)
    with pytest.raises(ValueError, match="foil_id"):
        alti_logit(model, SRC, TGT, 0, model.config.tgt_vocab_size)


def test_on_the_shipped_model_dog_decides_hund_over_katze():
    translator = Translator.from_pretrained(SHIPPED)
    translation = translator.translate("A dog runs through the snow.")
    step = translation.tgt_tokens.index("▁Hund")
    result = alti_logit(translator.model, translation.src_ids, translation.tgt_ids, step,
                        translator.tokenizer.piece_to_id("▁Katze"))
    assert result.log_odds > 0
    assert translation.src_tokens[int(np.argmax(result.source))] == "▁dog"
    assert result.source.max() > 0.4 * result.log_odds
