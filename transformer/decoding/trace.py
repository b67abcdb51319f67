"""The trace: the one object decoding hands to everything else (views, export, API, analysis).

For one sentence it holds the source and target pieces and ids, the steps (chosen token, its
probability, top-k candidates), the search tree, and every recorded quantity keyed by probe name. Each
recorded array carries its own row and column labels, so nobody re-derives which token a row is:

    rows of every decoder probe: the token that position predicted (tgt_tokens)
    keys of decoder self-attention: the decoder inputs, <s> followed by tgt_tokens[:-1]
    keys of cross-attention, rows and keys of encoder self-attention: src_tokens
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from ..core.probes import ENCODER, PROBES, SOURCE, TARGET
from .decoded import FINISHED, KEPT, PRUNED, SearchNode, StepTrace
from .logit_lens import LogitLens


@dataclass
class Recorded:
    """One recorded quantity of one sentence, labelled: `values` has the axes `axes` (layer first)."""

    name: str  # the probe name, e.g. "cross"
    title: str
    values: np.ndarray  # float32; attention (L, H, rows, cols), layer outputs (L, rows, D)
    axes: tuple[str, ...]
    rows: list[str]  # one label per query position
    cols: list[str] | None  # one label per key, None when the last axis is features
    row_title: str
    col_title: str


class AnalysisResult(Protocol):
    """An analysis's result (analysis/registry.py): an instance of a dataclass, whose fields are its labelled, typed
    numbers."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


# the built-in analyses whose results a Translation also shows as fields (`norms`, `contributions`)
ALTI_PLUS, NORMS = "alti", "norms"


@dataclass
class Norms:
    """Norm-based attention's vector norms (analysis/norms.py), the "norms" analysis's result."""

    by_kind: dict[str, np.ndarray]  # attention kind -> (layers, heads, keys) ‖f_h(x_j)‖


@dataclass
class Attention:
    """numpy float32 arrays. Rows are queries, columns keys."""

    encoder_self: np.ndarray  # (L, H, S, S)
    decoder_self: np.ndarray  # (L, H, T, T): row i predicted tgt_tokens[i]; keys are BOS + tgt_tokens[:-1]
    cross: np.ndarray  # (L, H, T, S): columns are src_tokens


@dataclass
class Step:
    token: str
    token_id: int
    prob: float
    topk: list[tuple[str, float]]
    hypotheses: list[tuple[str, float]] | None = None  # beam search: live hypotheses (pieces joined by spaces, score)
    node: int | None = None  # this step's node in the search tree
    forced: bool = False  # the token came from a forced prefix (`prob` is still the model's)


@dataclass
class TreeNode(SearchNode):
    token: str = ""


@dataclass
class SearchTree:
    """Every expansion a search made; `winner` lists the nodes of the returned output, first step first."""

    nodes: list[TreeNode]
    winner: list[int]

    def path_to(self, node_id: int) -> list[int]:
        path = []
        while node_id is not None:
            path.append(node_id)
            node_id = self.nodes[node_id].parent
        return path[::-1]

    def children(self, node_id: int | None) -> list[TreeNode]:
        return [n for n in self.nodes if n.parent == node_id]


@dataclass
class Translation:
    source: str  # the input sentence
    text: str  # the detokenized translation
    src_tokens: list[str]  # source pieces, ending with </s>
    tgt_tokens: list[str]  # output pieces, without BOS, with </s> if produced
    src_ids: list[int]
    tgt_ids: list[int]
    steps: list[Step]
    score: float
    truncated: bool  # the source was longer than the model's max_len and was cut
    strategy: str = "greedy"
    settings: dict = field(default_factory=dict)  # the strategy's settings as used, and max_length
    recorded: dict[str, Recorded] = field(default_factory=dict)
    tree: SearchTree | None = None
    logit_lens: LogitLens | None = None  # what every decoder layer would predict at every step
    # the results of the analyses run on it (analysis/registry.py), by analysis name: each a dataclass
    analyses: dict[str, AnalysisResult] = field(default_factory=dict)

    @property
    def norms(self) -> dict[str, np.ndarray] | None:
        """Per attention kind, (layers, heads, keys): the norm of what each head moves from each key (norm-based
        attention, Kobayashi et al., 2020), once the "norms" analysis (analysis/norms.py) ran."""
        norms = self.analyses.get(NORMS)
        return None if norms is None else norms.by_kind

    @norms.setter
    def norms(self, by_kind: dict[str, np.ndarray] | None) -> None:
        self._set(NORMS, None if by_kind is None else Norms(by_kind))

    @property
    def contributions(self) -> AnalysisResult | None:
        """ALTI+ (analysis/alti.py Contributions): how much of each prediction came from each source piece and
        each decoder input, through the layers, once the "alti" analysis ran (a pre-norm model's)."""
        return self.analyses.get(ALTI_PLUS)

    @contributions.setter
    def contributions(self, contributions: AnalysisResult | None) -> None:
        self._set(ALTI_PLUS, contributions)

    def _set(self, name: str, result) -> None:
        if result is None:
            self.analyses.pop(name, None)
        else:
            self.analyses[name] = result

    @property
    def decoder_input_tokens(self) -> list[str]:
        """What was fed to the decoder: BOS followed by tgt_tokens[:-1] (the keys of decoder self-attention)."""
        return ["<s>"] + self.tgt_tokens[:-1]

    def weighted_norms(self, kind: str) -> np.ndarray | None:
        """Norm-based attention ‖α_ij f(x_j)‖ of `kind`, (layers, heads, queries, keys), once `norms` is filled."""
        if self.norms is None or kind not in self.recorded:
            return None
        return weighted_norms(self.recorded[kind].values, self.norms[kind])

    @property
    def attention(self) -> Attention | None:
        if not all(kind in self.recorded for kind in ("encoder_self", "decoder_self", "cross")):
            return None
        return Attention(*(self.recorded[kind].values for kind in ("encoder_self", "decoder_self", "cross")))


def weighted_norms(weights: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """‖α_ij f_h(x_j)‖ = α_ij ‖f_h(x_j)‖: weights (layers, heads, queries, keys) times norms (layers, heads, keys)."""
    return weights * norms[:, :, None, : weights.shape[-1]]


def label_recorded(arrays: dict[str, np.ndarray], src_tokens: list[str], tgt_tokens: list[str]) -> dict[str, Recorded]:
    decoder_inputs = ["<s>"] + tgt_tokens[:-1]
    labelled = {}
    for name, values in arrays.items():
        probe = PROBES[name]
        rows = src_tokens if probe.stage == ENCODER else tgt_tokens
        cols = {SOURCE: src_tokens, TARGET: decoder_inputs, None: None}[probe.keys]
        labelled[name] = Recorded(
            name,
            probe.title,
            values,
            probe.axes,
            list(rows),
            None if cols is None else list(cols),
            probe.row_title,
            probe.col_title,
        )
    return labelled


def labelled_tree(nodes: list[SearchNode], winner: list[int], piece) -> SearchTree:
    return SearchTree([TreeNode(**vars(n), token=piece(n.token_id)) for n in nodes], list(winner))


def path_tree(steps: list[StepTrace], piece) -> SearchTree:
    """A single-path search (greedy, sampling) as a tree: the chosen tokens in a line, each step's other
    top-k candidates as pruned leaves."""
    nodes: list[TreeNode] = []
    winner: list[int] = []
    parent, score = None, 0.0
    for depth, step in enumerate(steps):
        for token_id, prob in step.topk:
            if token_id != step.token_id:
                log_prob = math.log(max(prob, 1e-30))
                nodes.append(TreeNode(len(nodes), parent, depth, token_id, log_prob, score + log_prob, score + log_prob,
                                      PRUNED, piece(token_id)))
        log_prob = math.log(max(step.prob, 1e-30))
        score += log_prob
        status = FINISHED if depth == len(steps) - 1 else KEPT
        nodes.append(
            TreeNode(len(nodes), parent, depth, step.token_id, log_prob, score, score, status, piece(step.token_id))
        )
        parent = nodes[-1].id
        winner.append(parent)
    return SearchTree(nodes, winner)
