"""Word alignments read off cross-attention, their error rate, and the Pharaoh format they are stored in.

An alignment is a set of (source word index, target word index) pairs, both 0-based over the sentence's
words with "<s>" and "</s>" left out (the order of Pharaoh's "i-j", which eflomal and fast_align write).

Two readings of a (T, S) piece-level cross-attention, rows the positions that predicted tgt_tokens[i]:
    attention   Garg et al., 2019: each target word is aligned to the source word it attends to most, read
                at the step that predicted it.
    shift       Shift-Att, Chen et al., 2020: read at the next step instead, whose query has the word as its
                decoder input. Row i + 1 then stands for tgt_tokens[i]; a word at the very end of an output
                cut off before "</s>" has no next step and stays unaligned.
Pieces are merged into words first (decoding/words.py): attention summed over a source word's pieces,
averaged over a target word's pieces.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..decoding.trace import Translation
from ..decoding.words import merge_to_words, word_groups
from ..numbers import ascii_digits

Alignment = set[tuple[int, int]]  # (source word, target word)
BOUNDARY_TOKENS = ("<s>", "</s>")  # words never aligned (Garg et al. drop the end-of-sentence token too)
METHODS = ("attention", "shift")


@dataclass
class WordAttention:
    weights: np.ndarray  # (target words, source words), boundary tokens left out
    tgt_words: list[str]
    src_words: list[str]


@dataclass
class WordAlignment:
    links: Alignment
    tgt_words: list[str]
    src_words: list[str]
    method: str
    layer: int  # the cross-attention layer read (heads averaged)


def _real_words(pieces: list[str]) -> list[int]:
    """Indices of the word groups that are not boundary tokens."""
    return [index for index, group in enumerate(word_groups(pieces))
            if not (len(group) == 1 and pieces[group[0]] in BOUNDARY_TOKENS)]


def word_attention(weights: np.ndarray, tgt_pieces: list[str], src_pieces: list[str]) -> WordAttention:
    """(T, S) piece-level cross-attention -> word level, boundary tokens dropped."""
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(tgt_pieces), len(src_pieces)):
        raise ValueError(f"attention of shape {weights.shape} for {len(tgt_pieces)} target and "
                         f"{len(src_pieces)} source pieces")
    if not tgt_pieces or not src_pieces:
        return WordAttention(np.zeros((0, 0)), [], [])
    merged, tgt_words, src_words = merge_to_words(weights, tgt_pieces, src_pieces)
    rows, cols = _real_words(tgt_pieces), _real_words(src_pieces)
    return WordAttention(merged[np.ix_(rows, cols)], [tgt_words[i] for i in rows], [src_words[j] for j in cols])


def align(weights: np.ndarray, tgt_pieces: list[str], src_pieces: list[str]) -> Alignment:
    """Garg et al.: each target word to its most-attended source word."""
    words = word_attention(weights, tgt_pieces, src_pieces)
    if not words.src_words or not words.tgt_words:
        return set()
    return {(int(source), target) for target, source in enumerate(words.weights.argmax(axis=1))}


def shift_align(weights: np.ndarray, tgt_pieces: list[str], src_pieces: list[str]) -> Alignment:
    """Shift-Att: as `align`, with target piece i read from attention row i + 1."""
    shifted = np.asarray(weights)[1:]
    return align(shifted, tgt_pieces[: len(shifted)], src_pieces)


def layer_attention(cross: np.ndarray, layer: int | None = None) -> tuple[np.ndarray, int]:
    """(L, H, T, S) -> the head average (T, S) of `layer`, by default the penultimate layer (Garg et al.
    found it aligns best); returns it with the layer used."""
    layers = cross.shape[0]
    if layer is None:
        layer = max(layers - 2, 0)
    if not -layers <= layer < layers:
        raise ValueError(f"layer must be in [0, {layers - 1}], got {layer}")
    return np.asarray(cross[layer], dtype=np.float64).mean(axis=0), layer % layers


def translation_alignment(translation: Translation, method: str = "attention",
                          layer: int | None = None) -> WordAlignment:
    """Word alignment of a translation made with capture=True (or record=["cross"])."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if "cross" not in translation.recorded:
        raise ValueError("alignment needs cross-attention recorded; translate with capture=True")
    cross = translation.recorded["cross"]
    weights, layer = layer_attention(cross.values, layer)
    reader = align if method == "attention" else shift_align
    words = word_attention(weights, cross.rows, cross.cols)
    return WordAlignment(reader(weights, cross.rows, cross.cols), words.tgt_words, words.src_words, method, layer)


def alignment_error_rate(predicted: Alignment, sure: Alignment, possible: Alignment | None = None) -> float:
    """AER (Och & Ney, 2003) = 1 - (|A & S| + |A & P|) / (|A| + |S|), with P the sure links plus the possible
    ones; with no possible links this is 1 - 2 |A & S| / (|A| + |S|). 0 when both are empty."""
    return corpus_alignment_error_rate([predicted], [sure], None if possible is None else [possible])


def corpus_alignment_error_rate(predicted: list[Alignment], sure: list[Alignment],
                                possible: list[Alignment] | None = None) -> float:
    """AER over a corpus: the counts are summed over sentences before dividing (as Och & Ney, and the
    alignment literature since, report it)."""
    if len(predicted) != len(sure) or (possible is not None and len(possible) != len(sure)):
        raise ValueError("one predicted, sure (and possible) alignment per sentence is needed")
    possible = possible or [set() for _ in sure]
    hits = predicted_total = sure_total = 0
    for a, s, p in zip(predicted, sure, possible):
        a, s = set(a), set(s)
        hits += len(a & s) + len(a & (s | set(p)))
        predicted_total += len(a)
        sure_total += len(s)
    return 1.0 - hits / (predicted_total + sure_total) if predicted_total + sure_total else 0.0


def format_pharaoh(alignment: Iterable[tuple[int, int]]) -> str:
    """'0-0 1-2 ...' sorted by source then target word."""
    return " ".join(f"{i}-{j}" for i, j in sorted(alignment))


def parse_pharaoh(line: str) -> Alignment:
    links = set()
    for token in line.split():
        source, dash, target = token.partition("-")
        if not dash or not ascii_digits(source) or not ascii_digits(target):
            raise ValueError(f"{token!r} is not a Pharaoh link 'i-j' (source word i, target word j, 0-based)")
        links.add((int(source), int(target)))
    return links


def read_pharaoh(path) -> list[Alignment]:
    """One alignment per line, as eflomal and fast_align write them (an empty line is an empty alignment)."""
    return [parse_pharaoh(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def write_pharaoh(path, alignments: Iterable[Alignment]) -> Path:
    path = Path(path)
    path.write_text("".join(format_pharaoh(a) + "\n" for a in alignments), encoding="utf-8")
    return path


__all__ = ["BOUNDARY_TOKENS", "METHODS", "Alignment", "WordAlignment", "WordAttention", "align", "alignment_error_rate",
           "corpus_alignment_error_rate", "format_pharaoh", "layer_attention", "parse_pharaoh", "read_pharaoh",
           "shift_align", "translation_alignment", "word_attention", "write_pharaoh"]

def precision_recall(predicted: Sequence[Alignment], sure: Sequence[Alignment]) -> tuple[float, float]:
    hits = sum(len(set(a) & set(s)) for a, s in zip(predicted, sure))
    return hits / max(sum(map(len, predicted)), 1), hits / max(sum(map(len, sure)), 1)


def diagonal_alignment(n_source: int, n_target: int) -> Alignment:
    """A baseline that reads no attention: target word j linked to the source word at the same relative place."""
    if not n_source:
        return set()
    return {(round(j * (n_source - 1) / max(n_target - 1, 1)), j) for j in range(n_target)}


def best(rows: Sequence[dict], **where) -> dict:
    """The row of lowest AER among those matching `where` (ties: the first in table order)."""
    return min((row for row in rows if all(row[key] == value for key, value in where.items())), key=lambda r: r["aer"])


def scored(predicted: Sequence[Alignment], sure: Sequence[Alignment], **labels) -> dict:
    """A table row: the labels, then the corpus AER, precision and recall of `predicted` against the sure links."""
    precision, recall = precision_recall(predicted, sure)
    return {**labels, "aer": round(corpus_alignment_error_rate(predicted, sure), 4), "precision": round(precision, 4),
            "recall": round(recall, 4)}
