"""Per-head statistics and roles (analysis/head_stats.py) on hand-made attention with known answers, and on a
real trace against a row-by-row loop."""
import math

import numpy as np
import pytest

from transformer.analysis.head_stats import (
    HeadStats,
    aggregate_head_stats,
    corpus_head_stats,
    head_stats,
    head_stats_array,
    is_punctuation,
)

SOURCE = ["▁a", "▁dog", "▁,", "▁runs", "</s>"]


def one_hot_rows(keys: list[int], n_cols: int) -> np.ndarray:
    rows = np.zeros((len(keys), n_cols))
    rows[np.arange(len(keys)), keys] = 1.0
    return rows


def encoder_heads() -> np.ndarray:
    """(1, 6, 5, 5): previous token, next token, itself, uniform, sink on </s>, and a half-and-half head."""
    n = len(SOURCE)
    half = 0.5 * one_hot_rows([1, 1, 1, 1, 1], n) + 0.5 * one_hot_rows([3, 3, 3, 3, 3], n)
    return np.stack([one_hot_rows([0, 0, 1, 2, 3], n), one_hot_rows([1, 2, 3, 4, 4], n), np.eye(n),
                     np.full((n, n), 1 / n), one_hot_rows([4] * n, n), half])[None]


# Hand-made heads hold float64 weights like 0.2 and 1/3: the statistics worked out by hand agree to float64 rounding,
# which pytest.approx's default (1e-6 relative) covers with room; one-hot rows give exact 0.0 and 1.0 (sums of exact
# zeros and ones, whatever their order).
def test_hand_made_encoder_heads_have_the_stats_and_roles_worked_out_by_hand():
    previous, following, itself, uniform, sink, half = head_stats_array(encoder_heads(), SOURCE, "encoder_self")
    assert previous.role == "previous token"
    assert previous.mean_offset == pytest.approx(-0.8)  # offsets 0, -1, -1, -1, -1
    assert previous.previous_share == pytest.approx(0.8)
    assert (previous.entropy, previous.max_weight, previous.spread) == (0.0, 1.0, 0.0)
    assert previous.punctuation_share == pytest.approx(0.2)  # row 3 looks at ","
    assert following.role == "next token" and following.mean_offset == pytest.approx(0.8)
    assert itself.role == "diagonal / alignment" and itself.diagonal_share == 1.0 and itself.mean_offset == 0.0
    assert uniform.role == "broad"
    assert uniform.entropy == pytest.approx(math.log(5)) and uniform.spread == pytest.approx(1.0)
    assert uniform.max_weight == pytest.approx(0.2)
    assert uniform.eos_share == pytest.approx(0.2) and uniform.punctuation_share == pytest.approx(0.2)
    assert sink.role == "sink on </s>" and sink.eos_share == pytest.approx(1.0)
    assert half.role == "mixed"
    assert half.entropy == pytest.approx(math.log(2)) and half.max_weight == pytest.approx(0.5)
    assert half.spread == pytest.approx(math.log(2) / math.log(5))
    assert [(s.layer, s.head) for s in (previous, half)] == [(0, 0), (0, 5)]


def test_decoder_self_offsets_count_from_the_query_s_own_input():
    """Row i sits at decoder input position i (input <s> or tgt_tokens[i-1]); key j is input position j. A head
    that reads the piece before its own input has offset -1; uniform causal attention has spread 1. Row 0,
    which can only see <s>, is left out."""
    inputs = ["<s>", "▁ein", "▁hund", "▁."]
    n = len(inputs)
    previous = one_hot_rows([0, 0, 1, 2], n)
    causal_uniform = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    first = one_hot_rows([0] * n, n)
    stats = head_stats_array(np.stack([previous, causal_uniform, first])[None], inputs, "decoder_self")
    assert stats[0].role == "previous token" and stats[0].mean_offset == -1.0 and stats[0].previous_share == 1.0
    assert stats[1].spread == pytest.approx(1.0) and stats[1].role == "broad"
    assert stats[1].entropy == pytest.approx(np.mean([math.log(k) for k in range(2, n + 1)]))
    assert stats[1].bos_share == pytest.approx(np.mean([1 / 2, 1 / 3, 1 / 4]))
    assert stats[2].mean_offset == pytest.approx(-2.0)
    assert stats[2].role == "sink on <s>" and stats[2].bos_share == 1.0
    assert stats[2].punctuation_share == 0.0


def test_cross_attention_diagonal_is_scaled_to_the_two_lengths():
    source = ["▁a", "▁b", "▁c", "▁d", "</s>"]  # 5 keys, 3 queries: diagonal at 0, 2, 4
    on_diagonal, drifting = one_hot_rows([0, 2, 4], 5), one_hot_rows([0, 0, 0], 5)
    aligned, drift = head_stats_array(np.stack([on_diagonal, drifting])[None], source, "cross")
    assert aligned.diagonal_share == 1.0
    assert aligned.eos_share == pytest.approx(1 / 3) and aligned.role == "diagonal / alignment"
    assert drift.diagonal_share == pytest.approx(1 / 3) and drift.mean_offset == pytest.approx(-1.0)
    assert drift.role == "mixed"  # previous/next token do not apply to cross-attention
    assert drift.previous_share == pytest.approx(1 / 3)


def test_aggregate_is_the_mean_of_sentences_and_roles_follow_the_means():
    first = head_stats_array(encoder_heads(), SOURCE, "encoder_self")
    swapped = encoder_heads()[:, [5, 1, 2, 3, 4, 0]]  # the second sentence swaps the first and last heads
    second = head_stats_array(swapped, SOURCE, "encoder_self")
    merged = aggregate_head_stats([first, second])
    assert len(merged) == 6 and all(s.sentences == 2 for s in merged)
    # head 0 is "previous token" in one sentence and half-and-half in the other, whose argmax (the first of
    # two equal keys, key 1) gives offsets 1, 0, -1, -2, -3
    assert merged[0].entropy == pytest.approx((0.0 + math.log(2)) / 2)
    assert merged[0].previous_share == pytest.approx((0.8 + 0.2) / 2)
    assert merged[0].mean_offset == pytest.approx((-0.8 - 1.0) / 2)
    assert merged[0].role == "mixed"
    assert [s.role for s in merged[1:5]] == [s.role for s in first[1:5]]
    assert merged[3].entropy == pytest.approx(math.log(5))


def loop_stats(values: np.ndarray, cols: list[str], kind: str, layer: int, head: int) -> dict:
    """The statistics of one head, row by row, as plain loops; rows that see one key only are skipped."""
    entropies, spreads, maxima, offsets, eos, punctuation = [], [], [], [], [], []
    for i, row in enumerate(values[layer, head]):
        seen = i + 1 if kind == "decoder_self" else len(cols)
        if seen == 1:
            continue
        entropies.append(-sum(p * math.log(p) for p in row if p > 0))
        spreads.append(entropies[-1] / math.log(seen))
        maxima.append(max(row))
        offsets.append(int(np.argmax(row)) - i)
        eos.append(sum(p for p, c in zip(row, cols) if c == "</s>"))
        text = [c.strip("▁") for c in cols]
        punctuation.append(sum(p for p, t in zip(row, text) if t and not any(ch.isalnum() for ch in t)))
    return {"entropy": np.mean(entropies), "spread": np.mean(spreads), "max_weight": np.mean(maxima),
            "mean_offset": np.mean(offsets), "eos_share": np.mean(eos), "punctuation_share": np.mean(punctuation)}


@pytest.mark.parametrize("kind", ["encoder_self", "decoder_self", "cross"])
def test_stats_of_a_real_trace_match_a_loop_over_rows(random_translator, kind):
    out = random_translator.translate("a dog runs , the child sits .", capture=True, max_length=10)
    recorded = out.recorded[kind]
    stats = head_stats(recorded)
    assert len(stats) == recorded.values.shape[0] * recorded.values.shape[1]
    for s in stats[:: 5]:
        expected = loop_stats(recorded.values.astype(np.float64), recorded.cols, kind, s.layer, s.head)
        for name, value in expected.items():  # vectorised float32 against loops in float64: float32 rounding
            assert getattr(s, name) == pytest.approx(value, abs=1e-6), name


def test_corpus_stats_average_the_sentences(random_translator):
    outs = [random_translator.translate(s, capture=True, max_length=8) for s in ("a dog runs .", "two girls play .")]
    merged = corpus_head_stats(outs, "cross")
    one, two = head_stats(outs[0].recorded["cross"]), head_stats(outs[1].recorded["cross"])
    # the same statistics from the same recordings, averaged: float64 rounding, inside approx's 1e-6 relative
    assert merged[7].entropy == pytest.approx((one[7].entropy + two[7].entropy) / 2)
    assert merged[7].role in {"sink on </s>", "sink on <s>", "diagonal / alignment", "broad", "mixed"}
    plain = random_translator.translate("a dog runs .", max_length=8)
    with pytest.raises(ValueError, match="capture=True"):
        corpus_head_stats([plain], "cross")


def test_punctuation_pieces():
    assert [is_punctuation(p) for p in ("▁.", ",", "▁«", "▁-", "▁a", "▁", "</s>", "a.")] == \
        [True, True, True, True, False, False, False, False]


def test_head_stats_is_a_dataclass_with_a_role():
    (stats,) = head_stats_array(np.eye(3)[None, None], ["▁x", "▁y", "</s>"], "encoder_self")
    assert isinstance(stats, HeadStats) and stats.role == "diagonal / alignment"
