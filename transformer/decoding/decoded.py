"""What a decoding strategy returns for one sentence, in token ids; `trace.py` turns it into pieces and labels."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

KEPT, PRUNED, FINISHED = "kept", "pruned", "finished"


@dataclass
class StepTrace:
    token_id: int
    prob: float  # probability of the chosen token under the distribution it was chosen from
    topk: list[tuple[int, float]]  # (token id, probability), most probable first
    hypotheses: list[tuple[list[int], float]] | None = None  # beam search: live (ids, score) after this step
    forced: bool = False  # the token came from a forced prefix; `prob` is still what the model gave it


@dataclass
class SearchNode:
    """One expansion a search made: a token appended to its parent's hypothesis."""

    id: int
    parent: int | None  # None: the token follows <s>
    depth: int  # 0-based decoding step that produced the token
    token_id: int
    log_prob: float  # log p(token | parent's prefix)
    score: float  # cumulative log-probability: parent's score + log_prob
    normalized_score: float  # score divided by the length penalty (beam search), else the score
    status: str  # KEPT (went on), PRUNED (examined, dropped), FINISHED (ended a hypothesis)


@dataclass
class DecodedSentence:
    token_ids: list[int]  # without BOS, with EOS if it was produced
    steps: list[StepTrace]
    score: float  # sum of log-probabilities (beam: length-normalised)
    recorded: dict[str, np.ndarray] = field(default_factory=dict)  # probe name -> float32 array (see probes.py)
    tree: list[SearchNode] | None = None  # every expansion, for strategies that search
    winner: list[int] | None = None  # node ids of the returned hypothesis, first step first
