import numpy as np
import pytest
import torch

from transformer import Transformer, capture_attention
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.decoded import FINISHED
from transformer.decoding.strategies.beam import beam_search, length_penalty
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy
from transformer.decoding.strategies.sampling import SamplingSettings, decode_sampling, filtered_distribution, nucleus
from transformer.tokenizer import BOS_ID, EOS_ID

from .conftest import tiny_config


def greedy(model, sources, max_length=None, capture=False, use_cache=True):
    return decode_greedy(model, sources, GreedySettings(), max_length, ATTENTION_KINDS if capture else (), use_cache)


def sample(model, sources, max_length, settings, capture=False):
    return decode_sampling(model, sources, settings, max_length, ATTENTION_KINDS if capture else ())


def beam(model, sources, beam_size=4, alpha=0.6, max_length=None, capture=False, use_cache=True):
    return beam_search(model, sources, beam_size, alpha, max_length, ATTENTION_KINDS if capture else (), use_cache)


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
    decoded = greedy(model, sources, max_length=15)
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
        decoded = beam(model, sources, beam_size=3, max_length=10, capture=True)
    elif strategy == "sample":
        decoded = sample(model, sources, 10, SamplingSettings(temperature=1.5, seed=7), capture=True)
    else:
        decoded = greedy(model, sources, max_length=10, capture=True)
    for src_ids, out in zip(sources, decoded):
        expected = teacher_forced_attention(model, src_ids, out.token_ids)
        for got, want in zip((out.recorded[kind] for kind in ATTENTION_KINDS), expected):
            assert got.shape == want.shape
            # step by step against one float64 pass: the recording stores float32 (~6e-8 on weights <= 1)
            np.testing.assert_allclose(got, want, atol=1e-6)


def test_beam_of_one_is_greedy():
    torch.manual_seed(5)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (4, 8)]
    assert [o.token_ids for o in beam(model, sources, beam_size=1, max_length=12)] == \
        [o.token_ids for o in greedy(model, sources, max_length=12)]


@pytest.mark.parametrize("beam_size, alpha", [(2, 0.0), (4, 0.6), (6, 1.0)])
def test_beam_returns_the_best_finished_hypothesis_of_its_tree(beam_size, alpha):
    torch.manual_seed(9)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (4, 8, 3)]
    for out in beam(model, sources, beam_size, alpha, max_length=12):
        nodes = out.tree
        # every node's score is its parent's score plus its own token's log-probability (Python floats: float64
        # rounding, far below 1e-9)
        for node in nodes:
            parent_score = 0.0 if node.parent is None else nodes[node.parent].score
            assert node.score == pytest.approx(parent_score + node.log_prob, abs=1e-9)
            assert node.normalized_score == pytest.approx(node.score / length_penalty(node.depth + 1, alpha), abs=1e-9)
            assert node.log_prob <= 0
        # the winner's nodes form a path from the root that spells the output
        assert [nodes[i].token_id for i in out.winner] == out.token_ids
        assert [nodes[i].parent for i in out.winner] == [None] + out.winner[:-1]
        # and its last node is the best finished one, with the score returned
        finished = [n for n in nodes if n.status == FINISHED]
        best = max(finished, key=lambda n: n.normalized_score)
        assert out.winner[-1] == best.id and out.score == pytest.approx(best.normalized_score)
        # the probabilities in the step trace are those of the tree (exp of a float32 log-probability: float32
        # rounding, inside pytest.approx's 1e-6 relative)
        assert [s.prob for s in out.steps] == pytest.approx([np.exp(nodes[i].log_prob) for i in out.winner])


def test_beam_tree_log_probabilities_match_the_model():
    """Independent check: each node's log-probability is the model's for that token after that prefix."""
    torch.manual_seed(10)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    src_ids = [5, 6, 7, 8, EOS_ID]
    out = beam(model, [src_ids], beam_size=3, max_length=6)[0]
    nodes = out.tree
    for node in nodes[:: max(1, len(nodes) // 12)]:
        prefix, walker = [], node.parent
        while walker is not None:
            prefix.insert(0, nodes[walker].token_id)
            walker = nodes[walker].parent
        with torch.no_grad():
            logits = model(torch.tensor([src_ids]), torch.tensor([[BOS_ID] + prefix]))[0, -1]
        logits[[0, BOS_ID]] = float("-inf")
        assert node.log_prob == pytest.approx(
            float(logits.log_softmax(-1)[node.token_id]), abs=1e-6
        )  # decoding works in float32


def test_batched_beam_equals_one_at_a_time():
    torch.manual_seed(6)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (4, 8, 2, 6)]
    batched = beam(model, sources, beam_size=4, max_length=12)
    for src_ids, out in zip(sources, batched):
        alone = beam(model, [src_ids], beam_size=4, max_length=12)[0]
        assert out.token_ids == alone.token_ids
        # a batch against one sentence: other shapes, other sums (and float32 logits); 1e-6 relative covers it
        assert out.score == pytest.approx(alone.score)


@pytest.mark.parametrize("beam_size", [2, 3, 5])
def test_candidates_from_each_rows_best_equal_those_of_the_whole_vocabulary(beam_size, monkeypatch):
    """Beam search takes a sentence's 2k candidates from its rows' own best 10 (beam.py); with the trace's top-k cut
    below 2k it searches every row's whole vocabulary instead. Both must keep the same hypotheses, expand the same
    tree and end with the same translation."""
    import transformer.decoding.strategies.beam as beam_module

    torch.manual_seed(11)
    model = Transformer(tiny_config(vocab_size=40)).eval()
    sources = [torch.randint(4, 40, (n,)).tolist() + [EOS_ID] for n in (5, 9, 3)]
    shortcut = beam(model, sources, beam_size=beam_size, max_length=14)
    monkeypatch.setattr(beam_module, "TRACE_TOPK", 2 * beam_size - 1)  # the whole-vocabulary path
    whole = beam(model, sources, beam_size=beam_size, max_length=14)
    for fast, full in zip(shortcut, whole):
        assert fast.token_ids == full.token_ids
        # exact: both read the log-probabilities of the same step on the same batch in the same thread; only the
        # choice of candidates differs
        assert fast.score == full.score
        assert [(n.parent, n.token_id, n.log_prob, n.status) for n in fast.tree] == \
               [(n.parent, n.token_id, n.log_prob, n.status) for n in full.tree]
        assert [s.hypotheses for s in fast.steps] == [s.hypotheses for s in full.steps]


def test_step_trace_is_consistent():
    torch.manual_seed(2)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    src_ids = [5, 6, 7, EOS_ID]
    out = beam(model, [src_ids], beam_size=3, max_length=8)[0]
    path = greedy(model, [src_ids], max_length=8)[0]
    for step, token in zip(path.steps, path.token_ids):
        assert step.token_id == token == step.topk[0][0]  # greedy picks the top candidate
        assert step.prob == pytest.approx(step.topk[0][1])  # one float32 probability, read twice
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
    first = sample(model, sources, 10, settings)
    again = sample(model, sources, 10, settings)
    alone = sample(model, sources[1:], 10, settings)
    assert [o.token_ids for o in first] == [o.token_ids for o in again]
    assert first[1].token_ids == alone[0].token_ids
    other = [sample(model, sources, 10, SamplingSettings(2.0, 5, 1.0, s))[0].token_ids for s in range(6)]
    assert len({tuple(o) for o in other}) > 1


def test_top_k_and_top_p_filters():
    # float32 through log, softmax and one renormalising division: assert_close's float32 defaults (1.3e-6 relative)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    top_k = filtered_distribution(logits, SamplingSettings(top_k=2))
    torch.testing.assert_close(top_k, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    top_p = filtered_distribution(logits, SamplingSettings(top_p=0.8))  # 0.5 + 0.3 reaches 0.8
    torch.testing.assert_close(top_p, torch.tensor([[0.625, 0.375, 0.0, 0.0]]))
    tiny_p = filtered_distribution(logits, SamplingSettings(top_p=0.1))  # the top token always stays
    torch.testing.assert_close(tiny_p, torch.tensor([[1.0, 0.0, 0.0, 0.0]]))


def sorted_nucleus(probs, top_p):
    """The nucleus by sorting the whole vocabulary, written out here: the reference."""
    kept = torch.zeros_like(probs)
    for row in range(probs.size(0)):
        total = 0.0
        for token in sorted(range(probs.size(1)), key=lambda t: -float(probs[row, t])):
            if total >= top_p:
                break
            kept[row, token] = probs[row, token]
            total += float(probs[row, token])
    return kept / kept.sum(dim=-1, keepdim=True)


@pytest.mark.parametrize("spread, top_p", [(0.5, 0.9), (3.0, 0.5), (6.0, 0.95), (6.0, 0.999), (8.0, 0.999)])
def test_the_nucleus_equals_sorting_every_token(spread, top_p):
    """A flat distribution's nucleus spans thousands of tokens (past the first 64 and 256 looked at), a peaked one a
    handful; either way it is what sorting the whole vocabulary gives."""
    torch.manual_seed(int(spread * 10))
    probs = (torch.randn(3, 3000, dtype=torch.float64) * spread).softmax(dim=-1)
    kept = nucleus(probs, top_p)
    # float64, the reference sums in another order: assert_close's float64 defaults (1e-7) are ample
    torch.testing.assert_close(kept, sorted_nucleus(probs, top_p))
    assert ((kept > 0).sum(dim=-1) > 0).all()


def test_a_batchs_nucleus_is_each_rows_own_and_sorts_the_vocabulary_only_where_needed(monkeypatch):
    """Rows of very different spreads in one batch: each row's nucleus is what it is alone and what sorting gives;
    only the flat row's nucleus is searched past the first 64 tokens."""
    torch.manual_seed(3)
    probs = torch.cat([(torch.randn(1, 3000, dtype=torch.float64) * spread).softmax(dim=-1)
                       for spread in (8.0, 0.3, 6.0, 8.0)])
    widths = []
    topk = torch.Tensor.topk
    monkeypatch.setattr(torch.Tensor, "topk", lambda self, k, **kw: widths.append((self.size(0), k)) or
                        topk(self, k, **kw))
    kept = nucleus(probs, 0.9)
    assert widths[0] == (4, 64) and all(rows == 1 for rows, _ in widths[1:]) and widths[-1][1] > 64, widths
    monkeypatch.undo()
    torch.testing.assert_close(kept, sorted_nucleus(probs, 0.9))
    for row in range(4):
        assert torch.equal(kept[row], nucleus(probs[row:row + 1], 0.9)[0])


def test_max_length_stops_decoding():
    torch.manual_seed(0)
    model = Transformer(tiny_config(vocab_size=12)).eval()
    for out in greedy(model, [[5, 6, EOS_ID]], max_length=4) + beam(model, [[5, 6, EOS_ID]], 3, max_length=4):
        assert 1 <= len(out.token_ids) <= 4


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_package_uncached_path_matches_cached(search):
    torch.manual_seed(8)
    model = Transformer(tiny_config(vocab_size=12)).double().eval()
    sources = [torch.randint(4, 12, (n,)).tolist() + [EOS_ID] for n in (5, 2, 7)]
    if search == "beam":
        cached, uncached = (beam(model, sources, 3, max_length=9, capture=True, use_cache=c) for c in (True, False))
    else:
        cached, uncached = (greedy(model, sources, 9, capture=True, use_cache=c) for c in (True, False))
    for a, b in zip(cached, uncached):
        assert a.token_ids == b.token_ids
        for kind in ATTENTION_KINDS:  # a float64 model: cached and uncached ~1e-16 apart, then stored as float32
            np.testing.assert_allclose(a.recorded[kind], b.recorded[kind], atol=1e-9)
