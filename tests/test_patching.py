"""Activation patching through the model's points (core/patching.py), held against forward passes written here with
plain forward hooks on the modules, never against the patching code's own output."""
import pytest
import torch

from transformer import Replace, Transformer, patch, record
from transformer.core.probes import active_patches
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy

from .conftest import tiny_config

CLEAN = torch.tensor([[3, 4, 5, 6, 2]])
CORRUPTED = torch.tensor([[3, 7, 5, 6, 2]])
TARGET = torch.tensor([[2, 5, 6, 7, 8]])


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    model = Transformer(tiny_config(12, n_layers=2)).eval()
    with torch.no_grad():
        model.generator.bias[model.config.eos_id] -= 3  # translations longer than their first piece
    return model


def hooked(module, change):
    """A forward pass's output of `module` changed by `change(output)`: an independent way to swap a tensor."""
    return module.register_forward_hook(lambda m, inputs, output: change(output))


def test_patching_nothing_gives_the_corrupted_run_and_everything_the_clean_one(model):
    with torch.no_grad():
        clean, corrupted = model(CLEAN, TARGET), model(CORRUPTED, TARGET)
        with record(model, "encoder.output") as rec:
            model(CLEAN, TARGET)
        with patch(model, {"encoder.output": rec["encoder.output"]}, positions=[]):
            nothing = model(CORRUPTED, TARGET)
        for layer in range(2):
            with patch(model, {f"encoder_layers.{layer}.output": rec["encoder.output"][layer]}):
                assert torch.equal(model(CORRUPTED, TARGET), clean)  # the same sums in the same order from there on
    assert torch.equal(nothing, corrupted) and not torch.allclose(clean, corrupted)
    assert active_patches.get() == ()


def head_output(attention, queries_from, keys_from, head):
    """One head's weighted sum of values (B, Tq, hs), written out from the stacked projection (Vaswani et al.,
    2017, eq. 1); no mask: these sources hold no padding and the query reads every key."""
    d = queries_from.size(-1)
    width = d // attention.n_heads
    rows = slice(head * width, (head + 1) * width)
    weight, bias = attention.in_proj.weight, attention.in_proj.bias
    q = queries_from @ weight[:d][rows].T + bias[:d][rows]
    k = keys_from @ weight[d: 2 * d][rows].T + bias[d: 2 * d][rows]
    v = keys_from @ weight[2 * d:][rows].T + bias[2 * d:][rows]
    return (q @ k.transpose(-2, -1) / width ** 0.5).softmax(-1) @ v


def swap_head(model, residual, attention, head, new_head, memory=None):
    """A forward hook on a pre-norm residual block around `attention`: its output with head `head`'s part of the
    output projection recomputed from `new_head(own)` (own: the head's output in this pass) instead of its own."""
    def hook(module, args, output):
        normed = module.norm(args[0])
        own = head_output(attention, normed, memory["memory"] if memory is not None else normed, head)
        width = own.size(-1)
        columns = attention.out_proj.weight[:, head * width: (head + 1) * width]
        return output + (new_head(own) - own) @ columns.T
    return residual.register_forward_hook(hook)


def keep_memory(model, kept):
    return model.encoder_norm.register_forward_hook(lambda m, a, out: kept.__setitem__("memory", out))


def test_one_heads_output_equals_swapping_its_slice_of_the_concatenated_heads(model):
    layer = model.decoder_layers[1]
    kept = {}
    with torch.no_grad():
        handles = [keep_memory(model, kept), layer.cross_attention_residual.register_forward_pre_hook(
            lambda m, args: kept.__setitem__("x", args[0]))]
        model(CLEAN, TARGET)
        clean_head = head_output(layer.cross_attention, layer.cross_attention_residual.norm(kept["x"]),
                                 kept["memory"], 2)
        handles[1].remove()
        handles.append(swap_head(model, layer.cross_attention_residual, layer.cross_attention, 2,
                                 lambda own: clean_head, kept))
        want = model(CORRUPTED, TARGET)
        for handle in handles:
            handle.remove()
        with record(model, "decoder_layers.1.cross_attention.concat") as rec:
            model(CLEAN, TARGET)
        concat = rec["decoder_layers.1.cross_attention.concat"]
        with patch(model, {"decoder_layers.1.cross_attention.concat": Replace(concat, heads=(2,))}):
            got = model(CORRUPTED, TARGET)
        corrupted = model(CORRUPTED, TARGET)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)  # the same sums grouped otherwise: float32 rounding
    assert not torch.allclose(got, corrupted, atol=1e-3)


def test_a_function_and_one_position_reach_the_explicit_attention_and_the_embedding(model):
    noise = torch.randn(16) * 3

    def add_noise(output):
        changed = output.clone()
        changed[:, 1] += noise
        return changed

    with torch.no_grad():
        handle = hooked(model.src_embed, add_noise)  # the scaled embedding, before positions
        want = model(CLEAN, TARGET)
        handle.remove()
        with patch(model, {"encoder_embedding_scaled": lambda x: x + noise}, positions=[1]):
            got = model(CLEAN, TARGET)
        # probabilities replaced: the fused attention steps aside for the explicit one
        uniform = lambda x: torch.full_like(x, 1 / x.size(-1))  # noqa: E731
        with record(model, "decoder_layers.0.cross_attention.weights") as rec, \
                patch(model, {"decoder_layers.0.cross_attention.weights": uniform}, heads=[0]):
            model(CLEAN, TARGET)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    weights = rec["decoder_layers.0.cross_attention.weights"][0]  # (B, H, T, S)
    assert torch.allclose(weights[:, 0], torch.full_like(weights[:, 0], 0.2)) and not torch.allclose(
        weights[:, 1], torch.full_like(weights[:, 1], 0.2))


def manual_greedy(model, src, limit):
    """Greedy decoding written out: the whole prefix teacher-forced at every step, padding and <s> never chosen."""
    prefix = [model.config.decoder_start_id]
    for _ in range(limit):
        logits = model(src, torch.tensor([prefix]))[0, -1]
        logits[[model.config.pad_id, model.config.decoder_start_id]] = float("-inf")
        prefix.append(int(logits.argmax()))
        if prefix[-1] == model.config.eos_id:
            break
    return prefix[1:]


@pytest.mark.parametrize("module, point, position", [("encoder_layers.0", "encoder_layers.0.output", 1),
                                                     ("decoder_layers.0", "decoder_layers.0.output", 2)])
def test_patching_while_decoding_changes_the_translation_as_a_swapped_forward_pass_does(model, module, point,
                                                                                        position):
    torch.manual_seed(1)
    vector = torch.randn(16) * 4
    source = CLEAN[0].tolist()
    limit = 5

    def swap(output):
        changed = output.clone()
        if changed.size(1) > position:
            changed[:, position] = vector
        return changed

    with torch.no_grad():
        handle = hooked(model.get_submodule(module), swap)
        want = manual_greedy(model, CLEAN, limit)
        handle.remove()
        with patch(model, {point: vector.expand(1, 64, 16)}, positions=[position]):
            got = decode_greedy(model, [source], GreedySettings(), limit)[0].token_ids
        plain = decode_greedy(model, [source], GreedySettings(), limit)[0].token_ids
    assert got == want and plain == manual_greedy(model, CLEAN, limit) and got != plain


def test_unequal_stacks_patch_each_heads_slice():
    torch.manual_seed(0)
    model = Transformer(tiny_config(12, encoder_layers=3, encoder_heads=4, decoder_layers=1, decoder_heads=2)).eval()

    with torch.no_grad():
        with record(model, "cross.concat") as rec:
            clean = model(CLEAN, TARGET)
        with patch(model, {"cross.concat": Replace(rec["cross.concat"], heads=[0, 1])}):
            restored = model(CORRUPTED, TARGET)  # the cross-attention is the decoder's one road to the source
        handles = [swap_head(model, layer.attention_residual, layer.self_attention, 3, torch.zeros_like)
                   for layer in model.encoder_layers]  # the encoder's head 4 of 4 silenced in every layer
        want = model(CLEAN, TARGET)
        for handle in handles:
            handle.remove()
        with patch(model, {"encoder_self.concat": torch.zeros(1)}, heads=[3]):
            got = model(CLEAN, TARGET)
    torch.testing.assert_close(restored, clean, rtol=0, atol=1e-5)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"heads at decoder_layers.0.cross_attention.concat: \[2\] out of range"):
        with patch(model, {"cross.concat": rec["cross.concat"]}, heads=[2]):
            pass
    with pytest.raises(ValueError, match="holds no heads"):
        with patch(model, {"encoder.output": torch.zeros(1)}, heads=[0]):
            pass
