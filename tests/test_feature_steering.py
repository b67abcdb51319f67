"""Steering by a dictionary's latents and the latents that cause a piece (transformer/features/steering.py), against
hand-written forward hooks on the same point: the edit x + (scale - 1) z_j W_dec[j] written out here, and the
causes' exact drops measured by hand with such a hook. On a tiny untrained model and a random dictionary."""
import pytest
import torch

from transformer.core.capture import record
from transformer.core.probes import points_of
from transformer.features import DictionaryConfig, DictionaryError, Origin, SavedDictionary, SparseDictionary
from transformer.features.steering import Edit, causes, steer, steering, teacher_forced

from .conftest import synthetic_pairs

SOURCE, TARGET = synthetic_pairs(1, seed=3)[0]


def random_dictionary(d_model: int, point: str, n: int = 48, k: int = 6, seed: int = 1) -> SavedDictionary:
    dictionary = SparseDictionary(DictionaryConfig(d_model=d_model, n=n, k=k, seed=seed))
    with torch.no_grad():  # a bias and encoder of their own, so codes are not the initial transpose's
        generator = torch.Generator().manual_seed(seed)
        dictionary.b_dec.copy_(0.1 * torch.randn(d_model, generator=generator))
        dictionary.b_enc.copy_(0.05 * torch.randn(n, generator=generator))
        dictionary.W_enc.add_(0.1 * torch.randn(d_model, n, generator=generator))
    return SavedDictionary(dictionary, Origin(point, "random", "synthetic", 1))


def layer_of(model, point: str):
    """The layer whose return value is `point` (a layer's `output`): a forward hook on it edits what the next layer
    reads, without the patching machinery."""
    assert point.endswith(".output") and points_of(model, point)[point]
    return model.get_submodule(point.removesuffix(".output"))


def hand_edit(saved: SavedDictionary, latent: int, scale: float, positions=None):
    """A forward hook on the point's layer: its output plus (scale - 1) z_j W_dec[j], z written out by hand."""
    d = saved.dictionary

    def hook(module, inputs, output):
        pre = (output - d.b_dec) @ d.W_enc + d.b_enc  # (B, T, n)
        kth = pre.topk(d.config.k, dim=-1).values[..., -1:]
        z = torch.where(pre >= kth, pre.relu(), torch.zeros_like(pre))
        part = z[..., latent, None] * d.W_dec[latent]
        if positions is not None:
            mask = torch.zeros(output.shape[1])
            mask[list(positions)] = 1.0
            part = part * mask[:, None]
        return output + (scale - 1.0) * part

    return hook


def logits(translator, src, tgt):
    with torch.no_grad():
        return translator.model(src, tgt)


@pytest.mark.parametrize("point", ["encoder_layers.1.output", "decoder_layers.2.output"])
@pytest.mark.parametrize("scale, positions", [(0.0, None), (3.0, (1, 2)), (-1.0, (0,))])
def test_steering_equals_a_hand_written_forward_hook(random_translator, point, scale, positions):
    saved = random_dictionary(random_translator.model.config.d_model, point)
    src, tgt, _ = teacher_forced(random_translator, SOURCE, TARGET)
    with torch.no_grad(), record(random_translator.model, point) as recording:
        random_translator.model(src, tgt)
    latent = int(saved.dictionary.encode(recording[point][0]).sum((0, 1)).argmax())  # one the sentence uses
    with steering(random_translator.model, saved, [Edit(latent, scale, positions)]):
        steered = logits(random_translator, src, tgt)
    module = layer_of(random_translator.model, point)
    handle = module.register_forward_hook(hand_edit(saved, latent, scale, positions))
    try:
        by_hand = logits(random_translator, src, tgt)
    finally:
        handle.remove()
    plain = logits(random_translator, src, tgt)
    # the same float32 operations in another order (matmul then a masked sum): rounding only
    assert torch.allclose(steered, by_hand, atol=1e-5), (steered - by_hand).abs().max()
    assert not torch.allclose(steered, plain, atol=1e-4)  # the edit changed something: the test can fail


def test_a_scale_of_one_changes_nothing_and_decoding_honours_an_edit(random_translator):
    saved = random_dictionary(random_translator.model.config.d_model, "encoder_layers.2.output")
    src, tgt, _ = teacher_forced(random_translator, SOURCE, TARGET)
    with steering(random_translator.model, saved, [Edit(3, 1.0)]):
        same = logits(random_translator, src, tgt)
    assert torch.equal(same, logits(random_translator, src, tgt))  # x + 0 is x, bit for bit
    strongest = [Edit(j, 20.0) for j in range(saved.dictionary.config.n)]
    result = steer(random_translator, saved, SOURCE, strongest, strategy="greedy", max_length=12)
    assert result.before == random_translator.translate(SOURCE, strategy="greedy", max_length=12).text
    with steering(random_translator.model, saved, strongest):
        assert result.after == random_translator.translate(SOURCE, strategy="greedy", max_length=12).text


@pytest.mark.parametrize("point", ["encoder_layers.2.output", "decoder_layers.1.output"])
def test_the_exact_causes_equal_patching_by_hand(random_translator, point):
    saved = random_dictionary(random_translator.model.config.d_model, point)
    src, tgt, target_ids = teacher_forced(random_translator, SOURCE, TARGET)
    piece = 3
    found = causes(random_translator, saved, SOURCE, TARGET, piece, exact=4)
    assert all(p.grad is None for p in random_translator.model.parameters())  # the shared model left as it was
    module = layer_of(random_translator.model, point)
    reach = src.shape[1] if point.startswith("encoder") else piece + 1

    def log_prob():
        return logits(random_translator, src, tgt)[0, piece].log_softmax(-1)[target_ids[piece]].item()

    base = log_prob()
    measured = [c for c in found if c.exact is not None]
    assert len(measured) == 4 and len(found) > 4
    for cause in measured:
        handle = module.register_forward_hook(hand_edit(saved, cause.latent, 0.0, range(reach)))
        try:
            drop = base - log_prob()
        finally:
            handle.remove()
        assert cause.exact == pytest.approx(drop, abs=1e-4)  # float32 log-probabilities, summed in another order
    assert [c.exact for c in measured] == sorted((c.exact for c in measured), reverse=True)
    estimated = [c.estimate for c in found if c.exact is None]
    assert max(estimated) <= min(c.estimate for c in measured) + 1e-9  # the measured are the best estimated


def test_bad_edits_and_pieces_name_the_setting(random_translator):
    saved = random_dictionary(random_translator.model.config.d_model, "encoder_layers.1.output")
    n = saved.dictionary.config.n
    for edits, named in [([Edit(n, 0.0)], "latent"), ([Edit(-1, 0.0)], "latent"), ([Edit(0, float("nan"))], "scale"),
                         ([Edit(0, 1e9)], "scale"), ([Edit(0, 0.0, (-2,))], "positions"), ("0", "edits")]:
        with pytest.raises(DictionaryError, match=named):
            steer(random_translator, saved, SOURCE, edits)
    with pytest.raises(DictionaryError, match="piece"):
        causes(random_translator, saved, SOURCE, TARGET, 99)
    unknown = random_dictionary(random_translator.model.config.d_model, "encoder_layers.9.output")
    with pytest.raises(DictionaryError, match="point"):
        steer(random_translator, unknown, SOURCE, [Edit(0, 0.0)])
