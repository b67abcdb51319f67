"""Subword pieces grouped into words, and attention merged from pieces to words."""
from __future__ import annotations

import numpy as np

WORD_START = "▁"  # sentencepiece marks the first piece of every word
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>")


def word_groups(pieces: list[str]) -> list[list[int]]:
    """Indices of the pieces that make up each word: a word starts at a piece beginning with '▁' or at a
    special token, and a special token is a word of its own."""
    groups: list[list[int]] = []
    for index, piece in enumerate(pieces):
        starts_word = piece.startswith(WORD_START) or piece in SPECIAL_TOKENS
        if not groups or starts_word or pieces[index - 1] in SPECIAL_TOKENS:
            groups.append([index])
        else:
            groups[-1].append(index)
    return groups


def word_label(pieces: list[str], group: list[int]) -> str:
    return "".join(pieces[i] for i in group).replace(WORD_START, " ").strip() or pieces[group[0]]


def merge_to_words(weights: np.ndarray, row_pieces: list[str], col_pieces: list[str]):
    """(rows, cols) piece-level attention -> word-level: mean over a word's query pieces, sum over its key
    pieces (so each merged row still sums to 1). Returns (weights, row words, column words)."""
    row_groups, col_groups = word_groups(row_pieces), word_groups(col_pieces)
    summed = np.stack([weights[:, g].sum(axis=1) for g in col_groups], axis=1)
    merged = np.stack([summed[g].mean(axis=0) for g in row_groups], axis=0)
    return (merged, [word_label(row_pieces, g) for g in row_groups], [word_label(col_pieces, g) for g in col_groups])
