"""Alignment evaluation (analysis/alignment_eval.py, symmetrize.py): readings of a hand-made attention array,
teacher-forced cross-attention against step-by-step decoding forced to the reference, words that line up with
word_attention's, symmetrisation worked out by hand, and the Pharaoh round trip of a reference through the CLI.
eflomal itself runs only in the last test, skipped when it is not installed (requirements-eval.txt)."""
import json
import re

import numpy as np
import pytest

from transformer.analysis.alignment import (
    corpus_alignment_error_rate,
    read_pharaoh,
    translation_alignment,
    word_attention,
    write_pharaoh,
)
from transformer.analysis.alignment_eval import (
    PieceSentence,
    Reading,
    diagonal_alignment,
    main,
    piece_sentences,
    read_alignments,
    score_readings,
    teacher_forced_cross,
    words_of,
)
from transformer.analysis.alignment_reference import aligner_lines, aligner_token
from transformer.analysis.norms import transported_norms
from transformer.analysis.symmetrize import grow_diag_final, intersection
from transformer.corpus.data import read_parallel

# two words per side: "the dogs" <- "die Hunde"; rows are the pieces each position predicted, then </s>
SENTENCE = PieceSentence(src_ids=[], tgt_ids=[], src_pieces=["▁die", "▁Hund", "e", "</s>"],
                         tgt_pieces=["▁the", "▁dog", "s", "</s>"])


def test_readings_of_a_hand_made_cross_attention():
    """Word weights: die = column 0, Hunde = columns 1 + 2; "dogs" averages rows 1 and 2 (Shift-Att: rows 2 and 3)."""
    cross = np.zeros((2, 2, 4, 4))  # (L, H, T, S)
    cross[0, 0] = [[0.7, 0.1, 0.1, 0.1],   # the:  die 0.7
                   [0.1, 0.3, 0.3, 0.3],   # dog:  Hunde 0.6
                   [0.1, 0.4, 0.4, 0.1],   # s:    Hunde 0.8 -> dogs: Hunde 0.7, die 0.1
                   [0.9, 0.0, 0.0, 0.1]]   # </s>: die 0.9 -> Shift-Att dogs: die 0.5, Hunde 0.4
    cross[0, 1] = [[0.1, 0.8, 0.0, 0.1],   # the:  Hunde 0.8
                   [0.9, 0.0, 0.0, 0.1],   # dogs: die 0.9 (both rows)
                   [0.9, 0.0, 0.0, 0.1],
                   [0.0, 0.5, 0.3, 0.2]]   # Shift-Att dogs: die 0.45, Hunde 0.4
    cross[1] = 0.25  # uniform: Hunde, two pieces, weighs twice as much as die
    wanted = {
        Reading(0, 0, "attention"): {(0, 0), (1, 1)},
        Reading(0, 1, "attention"): {(1, 0), (0, 1)},
        # the mean of the two heads: the: die 0.4, Hunde 0.5; dogs: die 0.5, Hunde 0.35
        Reading(0, None, "attention"): {(1, 0), (0, 1)},
        Reading(0, 0, "shift"): {(1, 0), (0, 1)},
        Reading(0, 1, "shift"): {(0, 0), (0, 1)},
        Reading(1, 1, "attention"): {(1, 0), (1, 1)},
        Reading(1, None, "shift"): {(1, 0), (1, 1)},
    }
    assert dict(zip(wanted, read_alignments(cross, SENTENCE, list(wanted)))) == wanted
    # norm-based: head 0 of layer 0 moves little from "die" (norm 0.1) and much from "Hunde" (norm 1): "the" is
    # then Hunde's (0.7 x 0.1 = 0.07 against (0.1 + 0.1) x 1); layer 1, uniform, keeps Hunde for both words
    norms = np.ones((2, 2, 4))
    norms[0, 0, 0] = 0.1
    by_norms = {Reading(0, 0, "attention", "norms"): {(1, 0), (1, 1)},
                Reading(0, 1, "attention", "norms"): {(1, 0), (0, 1)},
                Reading(1, None, "attention", "norms"): {(1, 0), (1, 1)}}
    assert dict(zip(by_norms, read_alignments(cross, SENTENCE, list(by_norms), norms))) == by_norms


def test_words_are_the_words_of_word_attention():
    src = ["▁Ein", "▁Boston", "▁Terrier", "▁läuft", "▁s", "a", "ft", "ig", "-", "grüne", "s", "▁Gras", ".", "</s>"]
    tgt = ["▁A", "▁Boston", "▁Ter", "rier", "▁runs", ".", "</s>"]
    words = word_attention(np.full((len(tgt), len(src)), 1 / len(src)), tgt, src)
    assert words_of(src) == words.src_words == ["Ein", "Boston", "Terrier", "läuft", "saftig-grünes", "Gras."]
    assert words_of(tgt) == words.tgt_words
    assert [aligner_token(w) for w in words_of(src)] == ["Ein", "Boston", "Terrier", "läuft", "saftig-grünes", "Gras"]
    assert aligner_token("...") == "..." and aligner_token("„Hallo“,") == "Hallo"


def test_aligner_lines_have_one_token_per_word(random_translator, corpus_dir):
    corpus = read_parallel(corpus_dir, "test_2016_flickr", "en", "de")
    sentences = piece_sentences(random_translator.tokenizer, corpus.source, corpus.target, 64)
    sources, targets = aligner_lines(sentences)
    for sentence, source, target in zip(sentences, sources, targets):
        assert len(source.split()) == len(words_of(sentence.src_pieces)) == len(words_of(sentence.src_pieces[:-1]))
        assert len(target.split()) == len(words_of(sentence.tgt_pieces))


def test_teacher_forced_cross_attention_equals_decoding_forced_to_the_reference(random_translator, corpus_dir):
    corpus = read_parallel(corpus_dir, "test_2016_flickr", "en", "de")
    sentences = piece_sentences(random_translator.tokenizer, corpus.source[:5], corpus.target[:5], 64)
    batched = list(teacher_forced_cross(random_translator.model, sentences, batch_size=3))
    for source, reference, sentence, (cross, norms) in zip(corpus.source, corpus.target, sentences, batched):
        forced = random_translator.translate(source, prefix=reference + "</s>", capture=True)
        recorded = forced.recorded["cross"]
        assert recorded.rows == sentence.tgt_pieces and recorded.cols == sentence.src_pieces
        # padded teacher-forced batches against forced decoding step by step: float32 rounding on weights <= 1
        np.testing.assert_allclose(cross, recorded.values, atol=1e-5)
        # padded batches give each sentence the norms of its own source, as one sentence alone does (norms of order
        # 1-10: float32 rounding, relative)
        alone = transported_norms(random_translator.model, sentence.src_ids, sentence.tgt_ids[1:])["cross"]
        np.testing.assert_allclose(norms, alone, rtol=1e-4, atol=1e-5)


def test_layer_average_readings_agree_with_translation_alignment(random_translator, corpus_dir):
    """Scored against the alignments translation_alignment reads off forced translations, the same reading
    has AER 0 and the other method the AER of its own alignments against those."""
    corpus = read_parallel(corpus_dir, "test_2016_flickr", "en", "de")
    sentences = piece_sentences(random_translator.tokenizer, corpus.source[:8], corpus.target[:8], 64)
    forced = [random_translator.translate(s, prefix=r + "</s>", capture=True)
              for s, r in zip(corpus.source[:8], corpus.target[:8])]
    reference = [translation_alignment(f, "attention", layer=1).links for f in forced]
    shifted = [translation_alignment(f, "shift", layer=1).links for f in forced]
    rows = score_readings(random_translator.model, sentences, reference, batch_size=3)
    layer_two = {r["method"]: r for r in rows
                 if r["reading"] == "layer average" and r["layer"] == 2 and r["measure"] == "weights"}
    # links are argmaxes, discrete like tokens: the same reading gives the same links, so AER exactly 0
    assert layer_two["attention"]["aer"] == 0.0 and layer_two["attention"]["precision"] == 1.0
    # the rows round AER to 4 decimals
    assert layer_two["shift"]["aer"] == pytest.approx(corpus_alignment_error_rate(shifted, reference), abs=1e-4)
    assert len(rows) == 2 * 2 * 3 * (4 + 1)  # measures x methods x layers x (heads + their average)
    assert {r["measure"] for r in rows} == {"weights", "norms"}


def test_diagonal_baseline():
    assert diagonal_alignment(3, 3) == {(0, 0), (1, 1), (2, 2)}
    assert diagonal_alignment(5, 3) == {(0, 0), (2, 1), (4, 2)}
    assert diagonal_alignment(2, 1) == {(0, 0)} and diagonal_alignment(0, 2) == set()


def test_grow_diag_final_worked_by_hand():
    forward = {(0, 0), (1, 1), (2, 2), (0, 3)}  # each target word linked to one source word
    reverse = {(0, 0), (1, 1), (2, 2), (3, 3)}  # each source word linked to one target word
    assert intersection(forward, reverse) == {(0, 0), (1, 1), (2, 2)}
    # (3, 3) neighbours (2, 2) diagonally and source word 3 is unaligned: grown. (0, 3) touches no link and, once
    # (3, 3) is in, both its words are aligned: left out (the union would keep it)
    assert grow_diag_final(forward, reverse) == {(0, 0), (1, 1), (2, 2), (3, 3)}
    # nothing in common: grow has no seed, "final" adds each direction's links, forward first, while one of their
    # words is unaligned; the reverse (0, 0) comes when both its words already are
    assert grow_diag_final({(0, 1), (1, 0)}, {(0, 0)}) == {(1, 0), (0, 1)}
    assert grow_diag_final({(0, 1)}, {(1, 1)}) == {(0, 1), (1, 1)}
    assert grow_diag_final({(0, 0), (1, 1)}, {(0, 0), (1, 1), (0, 1)}) == {(0, 0), (1, 1)}


def test_reference_round_trips_through_pharaoh_and_the_cli(random_translator, corpus_dir, tmp_path, capsys):
    corpus = read_parallel(corpus_dir, "test_2016_flickr", "en", "de")
    sentences = piece_sentences(random_translator.tokenizer, corpus.source, corpus.target, 64)
    # a made-up reference: every target word to the source word at its position, where there is one
    reference = [{(j, j) for j in range(min(len(words_of(s.src_pieces)), len(words_of(s.tgt_pieces))))}
                 for s in sentences]
    reference[3] = set()  # an empty line stays an empty alignment
    given = write_pharaoh(tmp_path / "reference.pharaoh", reference)
    assert read_pharaoh(given) == reference
    out = tmp_path / "alignment.json"
    main(["--checkpoint", str(random_translator.source), "--data-dir", str(corpus_dir), "--reference", str(given),
          "--reference-out", str(tmp_path / "again.pharaoh"), "--out", str(out), "--batch-size", "7"])
    assert (tmp_path / "again.pharaoh").read_text() == given.read_text()
    data = json.loads(out.read_text())
    assert data["split"] == "test_2016_flickr" and data["sentences"] == len(sentences) == 20
    assert data["reference_links"] == sum(map(len, reference))
    assert data["command"].startswith("python -m transformer.analysis.alignment_eval --checkpoint")
    heads = [r for r in data["table"] if r["reading"] == "head" and r["measure"] == "weights"]
    assert len(heads) == 2 * 3 * 4 and data["best_head"]["aer"] == min(r["aer"] for r in heads)
    by_norms = [r for r in data["table"] if r["reading"] == "head" and r["measure"] == "norms"]
    assert len(by_norms) == len(heads)
    assert data["best_head_by_measure"]["norms"]["shift"]["aer"] == min(
        r["aer"] for r in by_norms if r["method"] == "shift"
    )
    assert data["baseline"]["reading"] == "diagonal baseline"
    assert "best head: cross L" in capsys.readouterr().out


def test_a_reference_on_other_words_is_refused(random_translator, corpus_dir, tmp_path, capsys):
    corpus = read_parallel(corpus_dir, "test_2016_flickr", "en", "de")
    bad = write_pharaoh(tmp_path / "bad.pharaoh", [{(40, 0)}] * len(corpus.source))
    with pytest.raises(SystemExit) as stopped:
        main(["--checkpoint", str(random_translator.source), "--data-dir", str(corpus_dir), "--reference", str(bad),
              "--out", str(tmp_path / "x.json")])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in error and not (tmp_path / "x.json").exists()
    assert re.search(r"bad.pharaoh: reference line 1 links \[\(40, 0\)\], outside its", error)


def test_eflomal_aligns_a_word_by_word_corpus(corpus_dir):
    pytest.importorskip("eflomal", reason="eflomal is evaluation-only: pip install -r requirements-eval.txt")
    from transformer.analysis.statistical_aligner import eflomal_links

    corpus = read_parallel(corpus_dir, "train", "en", "de")  # German word i translates English word i
    forward, reverse = eflomal_links(corpus.source, corpus.target)
    diagonal = [{(i, i) for i in range(len(s.split()))} for s in corpus.source]
    for direction in (forward, reverse):
        assert corpus_alignment_error_rate(direction, diagonal) < 0.05
    symmetric = [grow_diag_final(f, r) for f, r in zip(forward, reverse)]
    assert corpus_alignment_error_rate(symmetric, diagonal) < 0.05
