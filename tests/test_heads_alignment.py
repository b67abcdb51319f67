"""Word alignment from cross-attention, AER and the Pharaoh format (analysis/alignment.py), on hand-made examples."""
import numpy as np
import pytest

from transformer.analysis.alignment import (
    align,
    alignment_error_rate,
    corpus_alignment_error_rate,
    format_pharaoh,
    parse_pharaoh,
    read_pharaoh,
    shift_align,
    translation_alignment,
    word_attention,
    write_pharaoh,
)

# target words: the(0) dogs(1, two pieces) run(2); source words: die(0) Hunde(1, two pieces) laufen(2)
TARGET = ["▁the", "▁dog", "s", "▁run", "</s>"]
SOURCE = ["▁die", "▁Hund", "e", "▁laufen", "</s>"]
CROSS = np.array([
    [0.40, 0.30, 0.30, 0.00, 0.00],  # "the": the largest piece is "die", the largest word "Hunde" (0.6)
    [0.00, 0.50, 0.10, 0.10, 0.30],
    [0.00, 0.20, 0.20, 0.20, 0.40],  # "dogs" averages these two rows: Hunde 0.5, laufen 0.15, </s> ignored
    [0.10, 0.05, 0.05, 0.30, 0.50],  # "run": </s> is the largest but is never a link
    [0.10, 0.10, 0.10, 0.10, 0.60],
])


def test_pieces_are_merged_into_words_and_boundaries_dropped():
    words = word_attention(CROSS, TARGET, SOURCE)
    assert words.tgt_words == ["the", "dogs", "run"] and words.src_words == ["die", "Hunde", "laufen"]
    # sums of a few given float64 weights: float64 rounding, inside assert_allclose's default 1e-7 relative
    np.testing.assert_allclose(words.weights, [[0.40, 0.60, 0.00], [0.00, 0.50, 0.15], [0.10, 0.10, 0.30]])
    assert align(CROSS, TARGET, SOURCE) == {(1, 0), (1, 1), (2, 2)}


def test_shift_att_reads_the_step_that_has_the_word_as_input():
    """Row i predicted target word i; Shift-Att aligns word i with row i + 1, whose decoder input is word i."""
    target, source = ["▁a", "▁b", "▁c", "</s>"], ["▁x", "▁y", "▁z", "</s>"]
    cross = np.array([[0.7, 0.1, 0.1, 0.1],
                      [0.1, 0.7, 0.1, 0.1],
                      [0.1, 0.1, 0.7, 0.1],
                      [0.6, 0.2, 0.1, 0.1]])
    assert align(cross, target, source) == {(0, 0), (1, 1), (2, 2)}
    assert shift_align(cross, target, source) == {(1, 0), (2, 1), (0, 2)}
    # an output cut off before </s>: its last word has no next step and stays unaligned
    assert shift_align(cross[:3], target[:3], source) == {(1, 0), (2, 1)}


def test_aer_of_a_hand_made_example():
    predicted = {(0, 0), (1, 1), (2, 1)}
    sure = {(0, 0), (1, 1), (2, 2), (3, 3)}
    # ratios of link counts: exact where they are 0 or 1, float64 rounding (approx's 1e-6 relative) otherwise
    assert alignment_error_rate(predicted, sure) == pytest.approx(1 - 2 * 2 / (3 + 4))  # 3/7
    # (2, 1) marked possible: AER = 1 - (|A&S| + |A&P|) / (|A| + |S|) = 1 - (2 + 3) / 7
    assert alignment_error_rate(predicted, sure, {(2, 1)}) == pytest.approx(2 / 7)
    assert alignment_error_rate(sure, sure) == 0.0
    assert alignment_error_rate({(5, 5)}, sure) == 1.0
    assert alignment_error_rate(set(), set()) == 0.0
    # a corpus sums the counts before dividing: (2 + 1) hits of 3 + 1 predicted and 4 + 1 sure links
    assert corpus_alignment_error_rate([predicted, {(0, 0)}], [sure, {(0, 0)}]) == pytest.approx(1 - 2 * 3 / (4 + 5))


def test_pharaoh_format_round_trips(tmp_path):
    assert parse_pharaoh("0-0 2-1 1-3") == {(0, 0), (2, 1), (1, 3)}
    assert format_pharaoh({(2, 1), (0, 0), (1, 3)}) == "0-0 1-3 2-1"
    alignments = [{(0, 0), (1, 2)}, set(), {(3, 1)}]
    path = write_pharaoh(tmp_path / "eflomal.fwd", alignments)
    assert path.read_text() == "0-0 1-2\n\n3-1\n"
    assert read_pharaoh(path) == alignments
    with pytest.raises(ValueError, match=r"'1:2' is not a Pharaoh link 'i-j'"):
        parse_pharaoh("0-0 1:2")


def test_alignment_of_a_translation_links_every_target_word_once(random_translator):
    out = random_translator.translate("a man rides a red bike .", capture=True, max_length=10)
    for method in ("attention", "shift"):
        result = translation_alignment(out, method=method)
        assert result.layer == out.recorded["cross"].values.shape[0] - 2  # the penultimate layer by default
        targets = [t for _, t in result.links]
        assert len(targets) == len(set(targets))
        assert all(0 <= s < len(result.src_words) and 0 <= t < len(result.tgt_words) for s, t in result.links)
        assert "</s>" not in result.src_words + result.tgt_words
    attention = out.recorded["cross"].values[1].mean(axis=0)
    assert translation_alignment(out, layer=1).links == align(attention, out.tgt_tokens, out.src_tokens)
    with pytest.raises(ValueError, match="method must be one of"):
        translation_alignment(out, method="best")
