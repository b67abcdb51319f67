"""What a plot shows, derived from a stored Translation: which matrix, with which labels, pieces or words.

Attention kinds and their axes (rows are queries, columns keys):
  encoder_self  source pieces x source pieces
  decoder_self  predicted pieces x decoder inputs (BOS followed by the pieces fed back)
  cross         predicted pieces x source pieces
"""
from __future__ import annotations

import numpy as np

KIND_TITLES = {
    "encoder_self": "Encoder self-attention",
    "decoder_self": "Decoder masked self-attention",
    "cross": "Cross-attention (decoder → encoder)",
}
WORD_START = "▁"  # sentencepiece marks the first piece of every word
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>")


def axis_labels(src_tokens: list[str], tgt_tokens: list[str], kind: str) -> tuple[list[str], list[str]]:
    """(row labels, column labels). Row i of the decoder kinds is the query that predicted tgt_tokens[i]."""
    if kind == "encoder_self":
        return src_tokens, src_tokens
    if kind == "decoder_self":
        return tgt_tokens, ["<s>"] + tgt_tokens[:-1]
    if kind == "cross":
        return tgt_tokens, src_tokens
    raise ValueError(f"attention kind must be one of {list(KIND_TITLES)}, got {kind!r}")


def select_heads(weights: np.ndarray, layer: int, head: int | str) -> np.ndarray:
    """(L, H, rows, cols) -> (rows, cols) for one head, or the mean over heads with head='mean'."""
    per_layer = weights[layer]
    return per_layer.mean(axis=0) if head == "mean" else per_layer[int(head)]


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
