"""The walk-through's typed results: labelled numbers, a stage, and the walk of one translation with every layer's and
every head's version of each stage."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Numbers:
    """One labelled quantity: `kind` says how to read `values`: "scalar", "vector" (features), "row" (one value per
    `cols` label), "matrix" (rows x cols), "tokens" (one entry per `cols` label, any JSON value). `axes` names what a
    row and a column are ("query", "key"), for the hover's "query 4 · key 6"."""

    name: str
    label: str
    kind: str
    values: object  # float, np.ndarray or list
    rows: list[str] | None = None
    cols: list[str] | None = None
    note: str = ""
    axes: tuple[str, str] = ("", "")


@dataclass
class Stage:
    key: str  # unique, e.g. "encoder.encoder_self.scores"
    block: str  # where it sits in the overview: text, input, encoder, target, decoder, output
    group: str  # the operation inside its block: "self", "cross", "ff", or the block itself
    title: str
    text: str  # one to three plain sentences
    why: str  # why this matters, one sentence
    formula: str
    module: str  # the package module it comes from
    numbers: list[Numbers] = field(default_factory=list)
    terms: tuple[str, ...] = ()  # glossary terms the stage uses
    ask: str = ""  # "predict first": the question the stage puts to the room before its numbers


@dataclass
class Variants:
    """Every version of one stage: one (`per` None), one per layer ("layer"), or one per layer and head ("head",
    layer-major: index layer * heads + head)."""

    per: str | None
    stages: list[Stage]


@dataclass
class Walkthrough:
    source: str
    text: str
    token: int
    step: int
    layer: int
    head: int
    architecture: dict  # norm placement, positions, tying, sizes: what the stages' order and text depend on
    src_tokens: list[str]
    decoder_inputs: list[str]
    tgt_tokens: list[str]
    stages: list[Stage]  # at `layer` and `head`
    variants: list[Variants]  # one per stage, in the same order
    logits: np.ndarray  # the step's logits over the whole target vocabulary, never-produced pieces at -inf
    top_ids: list[int]  # the ids of the largest logits, most probable first: the pieces the output's sliders name
    top_pieces: list[str]


def same_stage(a: Stage, b: Stage) -> bool:
    """Whether two versions of a stage show the same words and numbers."""
    if (a.title, a.text, len(a.numbers)) != (b.title, b.text, len(b.numbers)):
        return False
    return all(x.label == y.label and x.note == y.note and x.rows == y.rows and x.cols == y.cols
               and same_values(x.values, y.values) for x, y in zip(a.numbers, b.numbers))


def same_values(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b
