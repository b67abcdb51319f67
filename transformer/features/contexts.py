"""What a latent is: the corpus tokens where it is strongest, a label from them, the pieces its direction promotes,
and the latents a piece calls on.

    tops = top_contexts(dictionary, gathered, per_latent=10)      # latent -> its 10 strongest (row, activation)
    label_of(tops[412], pieces)                                    # "Hund / Hunde / dog" from its top tokens
    promoted_pieces(translator, dictionary, 412)                   # decoder points: the pieces W_dec[412] raises
    latents_of_piece(dictionary, gathered, pieces, "▁Hund")        # the latents strongest on "▁Hund" on average

A context is a row of the gathered vectors (gather.py's Activations: its sentence and position). No external model
names a latent: its label is its most frequent top tokens.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import torch

from .dictionary import DictionaryError, SparseDictionary, checked_setting


@dataclass(frozen=True)
class Context:
    row: int  # the row of the gathered vectors: its sentence and position are the Activations' at that row
    activation: float


@torch.no_grad()
def top_contexts(dictionary: SparseDictionary, vectors: torch.Tensor, per_latent: int = 10,
                 batch_size: int = 4096) -> dict[int, list[Context]]:
    """Each latent active anywhere in `vectors` (N, D) -> its `per_latent` strongest rows, strongest first (ties: the
    earlier row first). A running top-k over batches: memory (per_latent + batch_size) x n, not N x n."""
    per_latent = checked_setting("per_latent", per_latent, int, 1)
    n = dictionary.config.n
    best_values = torch.empty(0, n)
    best_rows = torch.empty(0, n, dtype=torch.long)
    for start in range(0, len(vectors), batch_size):
        z = dictionary.encode(vectors[start : start + batch_size]).float()  # (B, n)
        rows = torch.arange(start, start + len(z))[:, None].expand(-1, n)
        values, order = torch.cat([best_values, z]), torch.cat([best_rows, rows])
        # stable: sort by row, then by value (descending) with a stable sort keeps the earlier row of a tie first
        by_row = order.argsort(dim=0, stable=True)
        values, order = values.gather(0, by_row), order.gather(0, by_row)
        ranked = values.argsort(dim=0, descending=True, stable=True)[:per_latent]
        best_values, best_rows = values.gather(0, ranked), order.gather(0, ranked)
    found = {}
    for latent in range(n):
        contexts = [Context(int(r), float(v)) for v, r in zip(best_values[:, latent], best_rows[:, latent]) if v > 0]
        if contexts:
            found[latent] = contexts
    return found


def label_of(contexts: list[Context], pieces: list[str], words: int = 3) -> str:
    """A latent's label: its top contexts' most frequent pieces (the word marks dropped), most frequent first."""
    counts = Counter(pieces[c.row].replace("▁", "") or pieces[c.row] for c in contexts)
    return " / ".join(piece for piece, _ in counts.most_common(words))


@torch.no_grad()
def promoted_pieces(translator, dictionary: SparseDictionary, latent: int, top: int = 10) -> list[tuple[str, float]]:
    """The output pieces latent's direction raises most: W_dec[latent] through the output projection (its logit
    change per unit of activation, read directly, as the logit lens reads a residual vector)."""
    latent = checked_setting("latent", latent, int, 0, dictionary.config.n - 1)
    weights = translator.model.generator.weight.float()  # (V, D)
    change = weights @ dictionary.W_dec[latent].float()
    values, ids = change.topk(checked_setting("top", top, int, 1, len(change)))
    return [(translator.tokenizer.id_to_piece(int(i)), float(v)) for v, i in zip(values, ids)]


@torch.no_grad()
def latents_of_piece(dictionary: SparseDictionary, vectors: torch.Tensor, pieces: list[str], piece: str,
                     top: int = 10) -> list[tuple[int, float]]:
    """The latents with the highest mean activation over the rows whose piece is `piece`: (latent, mean)."""
    rows = [i for i, p in enumerate(pieces) if p == piece]
    if not rows:
        raise DictionaryError(f"piece {piece!r} does not occur among the {len(pieces)} gathered tokens")
    mean = dictionary.encode(vectors[rows]).float().mean(0)
    values, latents = mean.topk(min(checked_setting("top", top, int, 1), dictionary.config.n))
    return [(int(j), float(v)) for v, j in zip(values, latents) if v > 0]
