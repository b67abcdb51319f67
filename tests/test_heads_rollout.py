"""Attention rollout (analysis/rollout.py) and input x gradient (analysis/attribution.py)."""
import numpy as np
import pytest
import torch

from transformer import Tokenizer, Transformer, Translator
from transformer.analysis.attribution import attribute, input_x_gradient
from transformer.analysis.rollout import encoder_rollout, rollout, source_rollout

from .conftest import tiny_config


@pytest.fixture(scope="module")
def one_layer_translator(tokenizer_file):
    torch.manual_seed(4)
    tokenizer = Tokenizer.load(tokenizer_file)
    return Translator(Transformer(tiny_config(tokenizer.vocab_size, n_layers=1)), tokenizer)


def test_one_layer_rollout_is_the_hand_formula(one_layer_translator):
    out = one_layer_translator.translate("a dog runs in the park .", capture=True, max_length=8)
    encoder_self, cross = out.recorded["encoder_self"].values[0], out.recorded["cross"].values[0]  # (H, ., .)
    heads, n_src = encoder_self.shape[0], encoder_self.shape[1]
    encoder = np.zeros((n_src, n_src))
    for i in range(n_src):
        for j in range(n_src):
            encoder[i, j] = 0.5 * sum(encoder_self[h, i, j] for h in range(heads)) / heads + 0.5 * (i == j)
    expected = np.array([[sum(cross[:, t, k].mean() * encoder[k, s] for k in range(n_src)) for s in range(n_src)]
                         for t in range(cross.shape[1])])
    result = rollout(out)
    # float32 weights <= 1 through a product of two matrices against float64 loops: float32 rounding; each row of
    # the result sums ~10 such values, hence 1e-5 for the sums
    np.testing.assert_allclose(result.encoder, encoder, atol=1e-6)
    np.testing.assert_allclose(result.source, expected, atol=1e-6)
    np.testing.assert_allclose(result.source.sum(axis=1), 1.0, atol=1e-5)
    assert result.rows == out.tgt_tokens and result.cols == out.src_tokens


def test_layers_multiply_latest_on_the_left():
    """Two tokens: layer 1 makes both positions read token 1, layer 2 makes both read position 0.
    A_hat_1 = [[.5, .5], [0, 1]], A_hat_2 = [[1, 0], [.5, .5]]; A_hat_2 A_hat_1 = [[.5, .5], [.25, .75]]."""
    # halves and quarters are exact in binary floating point: assert_allclose's default 1e-7 relative is ample
    layer_1, layer_2 = np.array([[0.0, 1.0], [0.0, 1.0]]), np.array([[1.0, 0.0], [1.0, 0.0]])
    encoder_self = np.stack([np.stack([layer_1, layer_1]), np.stack([layer_2, layer_2])])  # two identical heads
    np.testing.assert_allclose(encoder_rollout(encoder_self), [[0.5, 0.5], [0.25, 0.75]])
    # cross-attention: layer 1 reads position 0, layer 2 position 1; "mean" averages them, "last" takes layer 2
    cross = np.array([[[[1.0, 0.0]]], [[[0.0, 1.0]]]])  # (L=2, H=1, T=1, S=2)
    np.testing.assert_allclose(source_rollout(encoder_self, cross), [[0.375, 0.625]])
    np.testing.assert_allclose(source_rollout(encoder_self, cross, "last"), [[0.25, 0.75]])
    np.testing.assert_allclose(source_rollout(encoder_self, cross, 0), [[0.5, 0.5]])
    with pytest.raises(ValueError, match=r"cross_layers must be 'mean', 'last' or a layer in \[0, 1\]"):
        source_rollout(encoder_self, cross, 2)


def test_rollout_needs_captured_attention(one_layer_translator):
    with pytest.raises(ValueError, match="capture=True"):
        rollout(one_layer_translator.translate("a dog .", max_length=4))


def log_prob_of_output(model, src_ids, tgt_ids):
    """Teacher-forced sum log p(tgt_ids | src_ids): computed from scratch, no gradients involved."""
    with torch.no_grad():
        logits = model(torch.tensor([src_ids]), torch.tensor([[2] + tgt_ids[:-1]]))[0]
        return logits.log_softmax(-1)[torch.arange(len(tgt_ids)), torch.tensor(tgt_ids)]


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_input_x_gradient_is_the_first_order_change_when_a_source_embedding_is_scaled(norm):
    """Scaling the source embedding e_s by (1 + eps) changes log p(target t) by eps * score[t, s] to first
    order. Source tokens are distinct and embeddings unshared, so scaling one vocabulary row scales exactly
    e_s; a central difference in float64 has error O(eps^2)."""
    torch.manual_seed(1)
    model = Transformer(tiny_config(norm=norm, final_norm=norm == "pre")).double().eval()
    src_ids = (torch.randperm(7) + 4)[:5].tolist() + [3]
    tgt_ids = torch.randint(4, 11, (4,)).tolist() + [3]
    result = input_x_gradient(model, src_ids, tgt_ids)
    assert result.scores.shape == (len(tgt_ids), len(src_ids))
    # float64 model, the same teacher-forced pass written apart: float64 rounding (~1e-15 on log-probabilities)
    np.testing.assert_allclose(result.log_probs, log_prob_of_output(model, src_ids, tgt_ids).numpy(), atol=1e-12)
    eps = 1e-5
    weight = model.src_embed.embedding.weight
    for s, token in enumerate(src_ids):
        original = weight.data[token].clone()
        changed = []
        for sign in (1, -1):
            with torch.no_grad():
                weight[token] = original * (1 + sign * eps)
            changed.append(log_prob_of_output(model, src_ids, tgt_ids))
        with torch.no_grad():
            weight[token] = original
        finite_difference = ((changed[0] - changed[1]) / (2 * eps)).numpy()
        # a central difference errs by O(eps^2) = 1e-10 relative, plus float64 rounding / eps ~ 1e-11: 1e-5 and
        # 1e-7 leave room and still fail on a wrong gradient
        np.testing.assert_allclose(result.scores[:, s], finite_difference, atol=1e-7, rtol=1e-5)
    assert np.abs(result.scores).max() > 1e-3  # the check above compared something


def test_attribution_of_a_translation_works_inside_inference_mode_and_is_labelled(random_translator):
    out = random_translator.translate("a red dog runs .", max_length=6)
    with torch.inference_mode():
        result = attribute(random_translator.model, out)
    assert result.scores.shape == (len(out.tgt_ids), len(out.src_ids))
    assert result.rows == out.tgt_tokens and result.cols == out.src_tokens
    expected = log_prob_of_output(random_translator.model, out.src_ids, out.tgt_ids).numpy()
    # a float32 model: the attribution's pass with gradients against a plain forward, float32 rounding on log-probs
    np.testing.assert_allclose(result.log_probs, expected, atol=1e-5)
    assert all(p.grad is None for p in random_translator.model.parameters())
    assert not any(len(m._forward_hooks) for m in random_translator.model.modules())


def test_attribution_refuses_a_model_in_training_mode():
    model = Transformer(tiny_config()).train()
    with pytest.raises(ValueError, match="eval mode"):
        input_x_gradient(model, [4, 5, 3], [6, 3])
