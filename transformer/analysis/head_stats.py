"""What each attention head does, in numbers, and a name for it (in the spirit of Voita et al., 2019, who
found positional, syntactic and rare-word heads, and Clark et al., 2019, who found heads parked on
separators).

Input: one recorded attention array (L, H, rows, cols) of one sentence, rows queries and columns keys,
with its key labels (a `trace.Recorded` carries both). Every statistic is a mean over the query rows.

Offsets. A row's offset is (index of its most-attended key) - (its own index), for every kind:
    encoder_self   query i and key j are source positions i and j: -1 is the previous source piece.
    decoder_self   query i is the position that predicted tgt_tokens[i]; it sits at decoder input position
                   i, whose input is <s> (i = 0) or tgt_tokens[i-1]. Key j is decoder input position j. So
                   offset 0 is the query's own input (the piece emitted last), -1 the piece before it (a
                   "previous token" head), and +1 cannot occur: the causal mask hides later positions.
    cross          query i is a target position and key j a source position, so the offset is only the
                   drift from the diagonal; a head is called "diagonal / alignment" when its argmax follows
                   the diagonal scaled to the two lengths, j = i (S-1)/(T-1).
Rows that can see a single key (decoder_self's first row, which can only look at "<s>") say nothing about
the head and are left out of every mean, unless there is no other row. In decoder_self row i sees i + 1
keys; `spread` (entropy over its maximum, log of the keys it can see) uses that, so short prefixes do not
make a head look focused.
"""
from __future__ import annotations

import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, fields

import numpy as np

from ..choices import checked_choice
from ..decoding.trace import Recorded, Translation
from ..decoding.words import WORD_START

# thresholds of `head_role` (which checks the ROLES in their order); shares are of query rows or of attention weight
SINK_SHARE = 0.5  # mean weight on "</s>" (or "<s>") keys from which a head is a sink
POSITION_SHARE = 0.6  # share of rows whose argmax sits at one relative position (-1, +1, the diagonal)
BROAD_SPREAD = 0.8  # normalised entropy from which a head is broad (1 = uniform over the visible keys)
DIAGONAL_TOLERANCE = {"encoder_self": 0.0, "decoder_self": 0.0, "cross": 1.0}  # in key positions
ROLES = ("previous token", "next token", "diagonal / alignment", "sink on </s>", "sink on <s>", "broad", "mixed")


@dataclass
class HeadStats:
    kind: str
    layer: int
    head: int
    entropy: float  # nats, mean over rows
    spread: float  # entropy / log(visible keys), mean over rows; in [0, 1]
    max_weight: float  # mean over rows of the largest weight
    mean_offset: float  # mean over rows of (argmax key index - query index), see the module docstring
    previous_share: float  # share of rows whose argmax offset is -1
    next_share: float  # share of rows whose argmax offset is +1
    diagonal_share: float  # share of rows whose argmax lies on the (length-scaled) diagonal
    eos_share: float  # mean weight on "</s>" keys
    bos_share: float  # mean weight on "<s>" keys (the decoder self-attention's first key)
    punctuation_share: float  # mean weight on keys that are punctuation only (after stripping "▁")
    sentences: int = 1  # how many sentences the numbers average over

    @property
    def role(self) -> str:
        return head_role(self)


def is_punctuation(piece: str) -> bool:
    text = piece.replace(WORD_START, "")
    return bool(text) and all(unicodedata.category(ch).startswith("P") for ch in text)


def visible_keys(kind: str, n_rows: int, n_cols: int) -> np.ndarray:
    """(rows,) how many keys each query may see."""
    if kind == "decoder_self":
        return np.arange(1, n_rows + 1)
    return np.full(n_rows, n_cols)


def diagonal(kind: str, n_rows: int, n_cols: int) -> np.ndarray:
    """(rows,) the key index on the diagonal of each query: itself for self-attention, scaled for cross."""
    if kind != "cross":
        return np.arange(n_rows, dtype=float)
    return np.arange(n_rows) * ((n_cols - 1) / (n_rows - 1) if n_rows > 1 else 0.0)


def head_stats_array(values: np.ndarray, cols: list[str], kind: str) -> list[HeadStats]:
    """Per-head statistics of one sentence's attention `values` (L, H, rows, cols) whose keys are `cols`."""
    checked_choice("kind", kind, DIAGONAL_TOLERANCE)
    weights = np.asarray(values, dtype=np.float64)
    layers, heads, n_rows, n_cols = weights.shape
    if len(cols) != n_cols:
        raise ValueError(f"{len(cols)} key labels for {n_cols} keys")
    seen = visible_keys(kind, n_rows, n_cols)
    informative = seen > 1 if (seen > 1).any() else np.ones(n_rows, dtype=bool)
    positions, seen = np.arange(n_rows)[informative], seen[informative]
    on_diagonal_key = diagonal(kind, n_rows, n_cols)[informative]
    weights = weights[:, :, informative]  # (L, H, rows kept, cols)
    entropy = -(weights * np.log(np.where(weights > 0, weights, 1.0))).sum(-1)  # (L, H, rows); 0 log 0 = 0
    spread = entropy / np.log(np.maximum(seen, 2))  # a lone single-key row (entropy 0) gets spread 0
    offsets = weights.argmax(-1) - positions  # (L, H, rows)
    on_diagonal = np.abs(weights.argmax(-1) - on_diagonal_key) <= DIAGONAL_TOLERANCE[kind]

    def key_share(selected: list[bool]) -> np.ndarray:
        return weights[..., np.array(selected, dtype=bool)].sum(-1).mean(-1)  # (L, H)

    eos, bos = key_share([c == "</s>" for c in cols]), key_share([c == "<s>" for c in cols])
    punctuation = key_share([is_punctuation(c) for c in cols])
    return [HeadStats(kind, layer, head, float(entropy[layer, head].mean()), float(spread[layer, head].mean()),
                      float(weights[layer, head].max(-1).mean()), float(offsets[layer, head].mean()),
                      float((offsets[layer, head] == -1).mean()), float((offsets[layer, head] == 1).mean()),
                      float(on_diagonal[layer, head].mean()), float(eos[layer, head]), float(bos[layer, head]),
                      float(punctuation[layer, head]))
            for layer in range(layers) for head in range(heads)]


def head_stats(recorded: Recorded) -> list[HeadStats]:
    """Per-head statistics of one recorded attention kind of one translation, layer by layer, head by head."""
    if recorded.cols is None or len(recorded.axes) != 4:
        raise ValueError(f"{recorded.name!r} is not an attention probe")
    return head_stats_array(recorded.values, recorded.cols, recorded.name)


def head_role(stats: HeadStats) -> str:
    """The first of ROLES whose threshold the head passes. Positional roles come before sinks: in decoder
    self-attention the first rows can only see "<s>", so a short sentence's previous-token head also puts much
    of its weight there. Previous/next token do not apply to cross-attention, whose keys are another sequence."""
    if stats.kind != "cross" and stats.previous_share >= POSITION_SHARE:
        return "previous token"
    if stats.kind != "cross" and stats.next_share >= POSITION_SHARE:
        return "next token"
    if stats.diagonal_share >= POSITION_SHARE:
        return "diagonal / alignment"
    if stats.eos_share >= SINK_SHARE:
        return "sink on </s>"
    if stats.bos_share >= SINK_SHARE:
        return "sink on <s>"
    if stats.spread >= BROAD_SPREAD:
        return "broad"
    return "mixed"


_AVERAGED = [f.name for f in fields(HeadStats) if f.name not in ("kind", "layer", "head", "sentences")]


def aggregate_head_stats(per_sentence: Iterable[list[HeadStats]]) -> list[HeadStats]:
    """The mean of each statistic over sentences, per (kind, layer, head); roles follow from the means."""
    groups: dict[tuple[str, int, int], list[HeadStats]] = defaultdict(list)
    for sentence in per_sentence:
        for stats in sentence:
            groups[(stats.kind, stats.layer, stats.head)].append(stats)
    return [HeadStats(kind, layer, head, sentences=sum(s.sentences for s in group),
                      **{name: float(np.mean([getattr(s, name) for s in group])) for name in _AVERAGED})
            for (kind, layer, head), group in groups.items()]


def corpus_head_stats(translations: Iterable[Translation], kind: str) -> list[HeadStats]:
    """Per-head statistics of `kind` averaged over translations made with capture=True (or record=[kind])."""
    per_sentence = []
    for translation in translations:
        if kind not in translation.recorded:
            raise ValueError(f"a translation has no {kind!r} recorded; "
                             f"translate with capture=True or record=[{kind!r}]")
        per_sentence.append(head_stats(translation.recorded[kind]))
    return aggregate_head_stats(per_sentence)


__all__ = ["BROAD_SPREAD", "DIAGONAL_TOLERANCE", "POSITION_SHARE", "ROLES", "SINK_SHARE", "HeadStats",
           "aggregate_head_stats", "corpus_head_stats", "head_role", "head_stats", "head_stats_array", "is_punctuation"]
