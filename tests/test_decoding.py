import numpy as np
import pytest
import torch

from transformer import Transformer, capture_attention
from transformer.beam import beam_search
from transformer.decoding import SamplingSettings, decode_single_path, filtered_distribution
from transformer.tokenizer import BOS_ID, EOS_ID

from .conftest import tiny_config


def uncached_greedy(model, src_ids, steps):
    """Reference: re-run the whole decoder over the growing prefix at every step, no cache."""
    src = torch.tensor([src_ids])
    prefix = [BOS_ID]
    for _ in range(steps):
        logits = model(src, torch.tensor([prefix]))[0, -1]
        logits[[0, BOS_ID]] = float("-inf")  # never produce padding or BOS
        token = int(logits.argmax())
        prefix.append(token)
        if token == EOS_ID:
            break
    return prefix[1:]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("norm", ["pre", "post"])
def test_cached_greedy_equals_uncached(seed, norm):
    torch.manual_seed(seed)
    model = Transformer(tiny_config(vocab_size=12, norm=norm, final_norm=norm == "pre")).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (3, 7, 5)]
    decoded = decode_single_path(model, sources, max_length=15)
    for src_ids, out in zip(sources, decoded):
        assert out.token_ids == uncached_greedy(model, src_ids, 15)


def teacher_forced_attention(model, src_ids, out_ids):
    """Attention of one full forward pass over the produced output: an independent computation."""
    with torch.no_grad(), capture_attention(model) as att:
        model(torch.tensor([src_ids]), torch.tensor([[BOS_ID] + out_ids[:-1]]))
    return [getattr(att, kind)[:, 0].numpy() for kind in ("encoder_self", "decoder_self", "cross")]


@pytest.mark.parametrize("strategy", ["greedy", "beam", "sample"])
def test_recorded_attention_is_that_of_the_produced_output(strategy):
    torch.manual_seed(3)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (6, 3, 9)]
    if strategy == "beam":
        decoded = beam_search(model, sources, beam_size=3, max_length=10, capture=True)
    else:
        sampling = SamplingSettings(temperature=1.5, seed=7) if strategy == "sample" else None
        decoded = decode_single_path(model, sources, max_length=10, sampling=sampling, capture=True)
    for src_ids, out in zip(sources, decoded):
        expected = teacher_forced_attention(model, src_ids, out.token_ids)
        for got, want in zip((out.encoder_self, out.decoder_self, out.cross), expected):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-6)


def test_beam_of_one_is_greedy_and_wider_beams_score_no_worse():
    torch.manual_seed(5)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (4, 8)]
    greedy = decode_single_path(model, sources, max_length=12)
    beam1 = beam_search(model, sources, beam_size=1, max_length=12)
    assert [o.token_ids for o in beam1] == [o.token_ids for o in greedy]
    for narrow, wide in zip(beam_search(model, sources, 2, alpha=0.0, max_length=12),
                            beam_search(model, sources, 6, alpha=0.0, max_length=12)):
        assert wide.score >= narrow.score - 1e-9


def test_batched_beam_equals_one_at_a_time():
    torch.manual_seed(6)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (4, 8, 2, 6)]
    batched = beam_search(model, sources, beam_size=4, max_length=12)
    for src_ids, out in zip(sources, batched):
        alone = beam_search(model, [src_ids], beam_size=4, max_length=12)[0]
        assert out.token_ids == alone.token_ids
        assert out.score == pytest.approx(alone.score)


def test_step_trace_is_consistent():
    torch.manual_seed(2)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    src_ids = [5, 6, 7, EOS_ID]
    out = beam_search(model, [src_ids], beam_size=3, max_length=8)[0]
    greedy = decode_single_path(model, [src_ids], max_length=8)[0]
    for step, token in zip(greedy.steps, greedy.token_ids):
        assert step.token_id == token == step.topk[0][0]  # greedy picks the top candidate
        assert step.prob == pytest.approx(step.topk[0][1])
        assert all(a[1] >= b[1] for a, b in zip(step.topk, step.topk[1:]))
    for step, token in zip(out.steps, out.token_ids):
        assert step.token_id == token
        assert 0 < step.prob <= 1
        assert step.hypotheses and len(step.hypotheses) <= 3
    assert len(out.steps) == len(out.token_ids) <= 8


def test_sampling_is_deterministic_per_seed_and_batch_independent():
    torch.manual_seed(4)
    model = Transformer(tiny_config(vocab_size=12)).eval()
    sources = [[5, 6, EOS_ID], [7, 8, 9, EOS_ID]]
    settings = SamplingSettings(temperature=2.0, top_k=5, seed=11)
    first = decode_single_path(model, sources, 10, settings)
    again = decode_single_path(model, sources, 10, settings)
    alone = decode_single_path(model, sources[1:], 10, settings)
    assert [o.token_ids for o in first] == [o.token_ids for o in again]
    assert first[1].token_ids == alone[0].token_ids
    other = [decode_single_path(model, sources, 10, SamplingSettings(2.0, 5, 1.0, s))[0].token_ids for s in range(6)]
    assert len({tuple(o) for o in other}) > 1


def test_top_k_and_top_p_filters():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    top_k = filtered_distribution(logits, SamplingSettings(top_k=2))
    torch.testing.assert_close(top_k, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    top_p = filtered_distribution(logits, SamplingSettings(top_p=0.8))  # 0.5 + 0.3 reaches 0.8
    torch.testing.assert_close(top_p, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    tiny_p = filtered_distribution(logits, SamplingSettings(top_p=0.1))  # the top token always stays
    torch.testing.assert_close(tiny_p, torch.tensor([[1.0, 0.0, 0.0, 0.0]]))


def test_max_length_stops_decoding():
    torch.manual_seed(0)
    model = Transformer(tiny_config(vocab_size=12)).eval()
    for out in decode_single_path(model, [[5, 6, EOS_ID]], max_length=4) + beam_search(model, [[5, 6, EOS_ID]], 3, max_length=4):
        assert 1 <= len(out.token_ids) <= 4


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_package_uncached_path_matches_cached(search):
    torch.manual_seed(8)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (5, 2, 7)]
    if search == "beam":
        cached, uncached = (beam_search(model, sources, 3, max_length=9, capture=True, use_cache=c) for c in (True, False))
    else:
        cached, uncached = (decode_single_path(model, sources, 9, capture=True, use_cache=c) for c in (True, False))
    for a, b in zip(cached, uncached):
        assert a.token_ids == b.token_ids
        np.testing.assert_allclose(a.cross, b.cross, atol=1e-9)
        np.testing.assert_allclose(a.decoder_self, b.decoder_self, atol=1e-9)
