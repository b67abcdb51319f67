"""Head masking (core/head_mask.py): a masked head's output is zero before the output projection, on both
attention paths, in decoding, in this context only."""
import copy
import threading

import numpy as np
import pytest
import torch

from transformer import Transformer, Translator
from transformer.core.head_mask import heads_masked
from transformer.core.model import causal_mask, padding_mask
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies import SettingError

from .conftest import tiny_config

SENTENCE = "a man rides a red bike near the water ."


def attention_module(model, kind, layer):
    """The module of (kind, layer), found by the model's attribute names (not the way head_mask finds it)."""
    if kind == "encoder_self":
        return model.encoder_layers[layer].self_attention
    decoder_layer = model.decoder_layers[layer]
    return decoder_layer.self_attention if kind == "decoder_self" else decoder_layer.cross_attention


def without_heads(model, heads_off):
    """A copy whose output projections ignore the masked heads: their input columns are zeroed, which removes
    exactly those heads' contributions. An independent way to switch a head off."""
    surgery = copy.deepcopy(model)
    with torch.no_grad():
        for kind, layer, head in heads_off:
            hs = model.config.stack_of(kind).head_dim
            attention_module(surgery, kind, layer).out_proj.weight[:, head * hs:(head + 1) * hs] = 0
    return surgery


def hand_attention(module, x, source, mask, heads_off):
    """Multi-head attention from the module's weights: per-head softmax(q k^T / sqrt(hs)) v, the masked heads'
    outputs zeroed, the heads concatenated and projected."""
    batch, n_q, d = x.shape
    h = module.n_heads
    hs = d // h

    def heads(t, part):  # part 0, 1, 2: the query, key, value rows of the stacked projection
        weight, bias = module.in_proj.weight[part * d:(part + 1) * d], module.in_proj.bias[part * d:(part + 1) * d]
        return (t @ weight.T + bias).view(batch, t.size(1), h, hs).permute(0, 2, 1, 3)

    q, k, v = heads(x, 0), heads(source, 1), heads(source, 2)
    scores = q @ k.transpose(-1, -2) / hs ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    per_head = torch.softmax(scores, dim=-1) @ v  # (B, H, Tq, hs)
    for head in heads_off:
        per_head[:, head] = 0
    concatenated = per_head.permute(0, 2, 1, 3).reshape(batch, n_q, d)
    return concatenated @ module.out_proj.weight.T + module.out_proj.bias


@pytest.fixture
def model():
    torch.manual_seed(0)
    return Transformer(tiny_config()).double().eval()


def batch():
    torch.manual_seed(3)
    src, tgt = torch.randint(4, 11, (2, 7)), torch.randint(4, 11, (2, 5))
    src[1, 5:] = 0
    return src, tgt


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("kind", ATTENTION_KINDS)
@pytest.mark.parametrize("heads", [(1,), (0, 3), (0, 1, 2, 3)])
def test_a_masked_head_contributes_nothing_to_the_layer_output(model, fused, kind, heads):
    model.use_fused_attention(fused)
    layer = 1
    module = attention_module(model, kind, layer)
    torch.manual_seed(5)
    x, memory = torch.randn(2, 5, 16, dtype=torch.float64), torch.randn(2, 7, 16, dtype=torch.float64)
    src_mask = padding_mask(torch.tensor([[5] * 7, [5] * 5 + [0] * 2]), 0)
    query, source, mask = {"encoder_self": (memory, memory, src_mask), "decoder_self": (x, x, causal_mask(5, x.device)),
                           "cross": (x, memory, src_mask)}[kind]
    with heads_masked(model, [(kind, layer, head) for head in heads]):
        out = module(query, *module.project_keys_values(source), mask)
    # float64 (2**-52 ~ 2.2e-16 relative): the hand computation sums in another order, ~1e-15 on values of order 1;
    # 1e-12 leaves room and still catches a masked head that leaks anything
    torch.testing.assert_close(out, hand_attention(module, query, source, mask, heads), atol=1e-12, rtol=0)
    # the other layer of the same kind is untouched, and so is this one once the block has exited
    other = attention_module(model, kind, 0)
    with heads_masked(model, [(kind, layer, head) for head in heads]):
        untouched = other(query, *other.project_keys_values(source), mask)
    torch.testing.assert_close(untouched, hand_attention(other, query, source, mask, ()), atol=1e-12, rtol=0)
    torch.testing.assert_close(module(query, *module.project_keys_values(source), mask),
                               hand_attention(module, query, source, mask, ()), atol=1e-12, rtol=0)


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_masked_logits_equal_a_model_whose_output_projection_ignores_those_heads(norm):
    torch.manual_seed(0)
    model = Transformer(tiny_config(norm=norm, final_norm=norm == "pre")).double().eval()
    heads_off = [("encoder_self", 0, 2), ("decoder_self", 1, 0), ("cross", 0, 1), ("cross", 1, 3)]
    src, tgt = batch()
    expected = without_heads(model, heads_off)(src, tgt)
    for fused in (True, False):
        model.use_fused_attention(fused)
        with heads_masked(model, heads_off):  # float64 through two layers: rounding ~1e-14, far below 1e-10
            torch.testing.assert_close(model(src, tgt), expected, atol=1e-10, rtol=0)
    assert not torch.allclose(model(src, tgt), expected)  # the mask made a difference, and it is gone


def test_fused_and_explicit_paths_agree_under_a_mask():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    heads_off = [("encoder_self", 1, 0), ("decoder_self", 0, 3), ("cross", 1, 2)]
    src, tgt = batch()
    with heads_masked(model, heads_off):
        fused = model(src, tgt)
        model.use_fused_attention(False)
        explicit = model(src, tgt)
    # float32, fused against explicit attention: torch orders the sums differently; rounding through two layers on
    # logits of order 1
    torch.testing.assert_close(fused, explicit, atol=1e-5, rtol=0)


def test_masking_nothing_is_bit_identical(random_translator, model):
    plain = random_translator.translate(SENTENCE, capture=True, max_length=12)
    for heads_off in (None, []):
        masked = random_translator.translate(SENTENCE, capture=True, max_length=12, heads_off=heads_off)
        # exact: no mask takes the very same path, the same ops on the same tensors in the same thread
        assert masked.tgt_ids == plain.tgt_ids and masked.score == plain.score
        assert [s.topk for s in masked.steps] == [s.topk for s in plain.steps]
        for kind in ATTENTION_KINDS:
            np.testing.assert_array_equal(masked.recorded[kind].values, plain.recorded[kind].values)
    assert "heads_off" not in plain.settings
    src, tgt = batch()
    unmasked = model(src, tgt)
    for heads_off in (None, []):
        with heads_masked(model, heads_off):
            assert torch.equal(model(src, tgt), unmasked)  # the same path, tensors and thread: bit-identical


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
def test_translating_with_heads_off_equals_translating_with_the_surgically_changed_model(random_translator, strategy):
    heads_off = [("cross", 2, 0), ("cross", 2, 1), ("decoder_self", 0, 3), ("encoder_self", 1, 2)]
    masked = random_translator.translate(SENTENCE, strategy=strategy, max_length=12, heads_off=heads_off, capture=True)
    reference = Translator(without_heads(random_translator.model, heads_off), random_translator.tokenizer)
    expected = reference.translate(SENTENCE, strategy=strategy, max_length=12)
    assert masked.tgt_ids == expected.tgt_ids
    # float32, another computation (zeroed weights against a mask): a sum of <= 12 log-probabilities of order 1-10,
    # each within ~1e-6 relative, stays well inside 1e-4
    assert masked.score == pytest.approx(expected.score, abs=1e-4)
    assert masked.settings["heads_off"] == heads_off
    # the explicit path (capture) and the fused one pick the same output under the mask
    fused = random_translator.translate(SENTENCE, strategy=strategy, max_length=12, heads_off=heads_off)
    assert fused.tgt_ids == masked.tgt_ids


def test_with_every_head_off_it_still_translates_and_no_longer_reads_the_source(random_translator):
    config = random_translator.model.config
    every_head = [(kind, layer, head) for kind in ATTENTION_KINDS for layer in range(config.n_layers)
                  for head in range(config.n_heads)]
    first = random_translator.translate(SENTENCE, max_length=8, heads_off=every_head)
    second = random_translator.translate("two girls play with a ball in the park", max_length=8, heads_off=every_head)
    assert first.tgt_ids and np.isfinite(first.score)
    # with cross-attention silent the decoder cannot tell the sources apart
    assert first.tgt_ids == second.tgt_ids
    # the decoder runs the same ops on the same inputs; only the silent cross-attention's key count differs, so at
    # most float32 rounding (~1e-6 per step's log-probability) separates the scores
    assert first.score == pytest.approx(second.score, abs=1e-5)


@pytest.mark.parametrize("heads_off, message", [
    ([("cross", 3, 0)], r"heads_off entry \('cross', 3, 0\) is not valid"),
    ([("cross", 0, 4)], r"heads_off entry \('cross', 0, 4\) is not valid"),
    ([("cross", -1, 0)], r"\('cross', -1, 0\)"),
    ([("encoder", 0, 0)], r"\('encoder', 0, 0\)"),
    ([("cross", 0)], r"\('cross', 0\)"),
    ([["cross", "0", 1]], r"\['cross', '0', 1\]"),
    ([("cross", True, 0)], r"\('cross', True, 0\)"),
    (("cross", 0, 1), r"heads_off entry 'cross' is not valid"),
    ("cross", r"heads_off must be a list"),
])
def test_invalid_entries_are_named_with_the_allowed_ranges(random_translator, heads_off, message):
    with pytest.raises(SettingError, match=message) as caught:
        random_translator.translate(SENTENCE, heads_off=heads_off)
    assert isinstance(caught.value, ValueError)
    assert "encoder_self: layer 0-2, head 0-3; decoder_self: layer 0-2, head 0-3; cross: layer 0-2, head 0-3" \
        in str(caught.value)


def test_entries_may_be_lists_and_duplicates_count_once(random_translator):
    out = random_translator.translate(SENTENCE, max_length=6, heads_off=[["cross", 1, 2], ("cross", 1, 2)])
    assert out.settings["heads_off"] == [("cross", 1, 2)]


def test_the_mask_stays_in_its_context(model):
    src, tgt = batch()
    plain = model(src, tgt)
    heads_off = [("cross", 0, 0), ("decoder_self", 1, 1)]
    expected = without_heads(model, heads_off)(src, tgt)
    seen_by_other_thread = {}
    with heads_masked(model, heads_off[:1]), heads_masked(model, heads_off[1:]):  # nested blocks add up
        torch.testing.assert_close(model(src, tgt), expected, atol=1e-10, rtol=0)  # float64 rounding, as above
        thread = threading.Thread(target=lambda: seen_by_other_thread.update(out=model(src, tgt)))
        thread.start()
        thread.join()
    # a thread with its own context sees no mask; that thread may run torch's kernels with another OpenMP team size,
    # so float64 rounding (as above) rather than the same bits - far below the masked heads' effect
    torch.testing.assert_close(seen_by_other_thread["out"], plain, atol=1e-10, rtol=0)
    with pytest.raises(RuntimeError, match="boom"), heads_masked(model, heads_off):
        raise RuntimeError("boom")
    assert torch.equal(model(src, tgt), plain)  # the same path, tensors and thread: bit-identical


def test_masking_keeps_gradients_flowing_through_the_other_heads(model):
    src, tgt = batch()
    model.train()
    with heads_masked(model, [("cross", 1, 0)]):
        model(src, tgt).sum().backward()
    hs = model.config.decoder.head_dim
    gradient = model.decoder_layers[1].cross_attention.out_proj.weight.grad
    assert gradient[:, :hs].abs().max() == 0  # the masked head's columns feed nothing: multiplied by exact zeros
    assert gradient[:, hs:].abs().max() > 0
