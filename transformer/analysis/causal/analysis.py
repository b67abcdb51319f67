"""What causes this word: the patching analyses of one question, their result, its JSON, and the registered analysis.

`causal_patching(model, question, analyses)` runs the clean and corrupted passes once (recording every point any
picture patches), then one batched pass per site kind (exact.py) and, for "attribution", one forward and one
backward pass (estimate.py). The JSON counts layers, positions, heads and pieces from 1, as every report does.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ...core.capture import record
from ...core.head_ref import shown
from ...core.model import Transformer
from ...decoding.trace import Translation
from ..registry import Analysis, ModelAccess
from .estimate import DISAGREE, agreement, estimate
from .exact import HEAD_SITES, RECORDED, TRACE_SITES, Exact, Grid
from .question import NOISE_TIMES_STD, Question, Runs, aligned_positions, embedding_noise_scale

ANALYSES = ("trace", "heads", "path", "attribution")


@dataclass
class Patching:
    question: Question
    p_clean: float
    p_corrupted: float
    logit_difference_clean: float | None
    logit_difference_corrupted: float | None
    aligned: list[tuple[int, int]]  # (clean position, corrupted position), 0-based
    grids: list[Grid]  # the exact pictures: trace (3 site kinds), heads (cross first), path
    estimates: list[Grid] = field(default_factory=list)  # attribution patching, one per exact grid
    rank_correlation: float | None = None
    disagreements: list[dict] = field(default_factory=list)
    milliseconds: dict[str, float] = field(default_factory=dict)


def check_analyses(names) -> tuple[str, ...]:
    names = tuple(names)
    unknown = [n for n in names if n not in ANALYSES]
    if unknown or not names:
        raise ValueError(f"analyses: {unknown or 'none'} not known; choose some of {', '.join(ANALYSES)}")
    return names


def causal_patching(model: Transformer, question: Question, analyses=ANALYSES) -> Patching:
    """The pictures `analyses` asks for (attribution estimates the exact pictures asked for, or all of them)."""
    if model.training:
        raise ValueError("patching needs the model in eval mode (model.eval()): dropout would make it random")
    analyses = check_analyses(analyses)
    runs = Runs(model, question)
    timings = {}
    with torch.inference_mode(False), torch.no_grad():
        start = time.perf_counter()
        with record(model, list(RECORDED)) as clean_rec:
            clean_logits = runs.clean()
        with record(model, list(RECORDED)) as corrupted_rec, runs.corruption():
            corrupted_logits = runs.last_logits(runs.corrupted_src)
        exact = Exact(runs, {name: clean_rec[name] for name in RECORDED},
                      {name: corrupted_rec[name] for name in RECORDED},
                      float(runs.probability(clean_logits)[0]), float(runs.probability(corrupted_logits)[0]))
        timings["clean and corrupted runs"] = (time.perf_counter() - start) * 1000
        grids = []
        exact_wanted = [a for a in analyses if a != "attribution"] or ["trace", "heads", "path"]
        if "trace" in exact_wanted:
            grids += [exact.trace(site) for site in TRACE_SITES]
        if "heads" in exact_wanted:
            grids += [exact.heads(site) for site in HEAD_SITES]
        if "path" in exact_wanted:
            grids.append(exact.path())
        for grid in grids:
            timings[f"{grid.analysis} {grid.site}"] = grid.milliseconds
    differences = runs.logit_difference(clean_logits), runs.logit_difference(corrupted_logits)
    result = Patching(question, exact.p_clean, exact.p_corrupted,
                      *(None if d is None else float(d[0]) for d in differences), runs.pairs, grids)
    if "attribution" in analyses:
        result.estimates = estimate(exact, grids)
        timings["attribution"] = result.estimates[0].milliseconds
        result.rank_correlation, result.disagreements = agreement(grids, result.estimates)
    if "attribution" in analyses and not [a for a in analyses if a != "attribution"]:
        result.grids = []  # asked for the estimate alone: the exact cells were its yardstick, not an answer
    result.milliseconds = timings
    return result


def nested(values: np.ndarray | None):
    """A grid as nested lists, NaN as None (JSON has no NaN)."""
    if values is None:
        return None
    return [[None if np.isnan(v) else round(float(v), 6) for v in row] for row in values]


def grid_json(grid: Grid) -> dict:
    return {"analysis": grid.analysis, "site": grid.site, "points": list(grid.points),
            "axes": [f"{axis} (from 1)" for axis in grid.axes], "restored_share": nested(grid.shares),
            "logit_difference": nested(grid.logit_differences), "milliseconds": round(grid.milliseconds, 1)}


def patching_json(result: Patching, pieces=None) -> dict:
    """The result as JSON; `pieces(ids)` names ids (the tokenizer's pieces) where given."""
    question = result.question
    name = pieces or (lambda ids: [str(i) for i in ids])
    aligned_clean = {i for i, _ in result.aligned}
    aligned_corrupted = {j for _, j in result.aligned}
    return {
        "target": {"piece": shown(question.step), "text": name([question.target_id])[0]},
        "contrast": None if question.contrast_id is None else name([question.contrast_id])[0],
        "p_clean": result.p_clean, "p_corrupted": result.p_corrupted,
        "logit_difference_clean": result.logit_difference_clean,
        "logit_difference_corrupted": result.logit_difference_corrupted,
        "clean_pieces": name(question.clean_src), "corrupted_pieces": name(question.corrupted_src),
        "noise": ({"positions": [p + 1 for p in question.noise_positions], "scale": question.noise_scale}
                  if question.noise_positions else None),
        "aligned_positions": [[i + 1, j + 1] for i, j in result.aligned],
        "unaligned_clean_positions": [i + 1 for i in range(len(question.clean_src)) if i not in aligned_clean],
        "unaligned_corrupted_positions": [j + 1 for j in range(len(question.corrupted_src))
                                          if j not in aligned_corrupted],
        "analyses": {analysis: [grid_json(g) for g in result.grids + result.estimates if g.analysis == analysis]
                     for analysis in ANALYSES if any(g.analysis == analysis for g in result.grids + result.estimates)},
        "attribution_rank_correlation": result.rank_correlation,
        "disagreement_threshold": DISAGREE if result.estimates else None,
        "disagreements": result.disagreements,
        "milliseconds": {k: round(v, 1) for k, v in result.milliseconds.items()},
    }


def question_of(access: ModelAccess, translation: Translation, corrupted: str | None, target: int,
                contrast: str | None = None, noise_word: int | None = None, noise_std: float = NOISE_TIMES_STD,
                seed: int = 0) -> Question:
    """The question in ids: `target` and `noise_word` count pieces from 1; `contrast` is a piece of the vocabulary;
    `noise_std` the noise's scale in standard deviations of the embeddings."""
    tokenizer, model = access.tokenizer, access.model
    if not 1 <= target <= len(translation.tgt_ids):
        raise ValueError(f"target must be a piece of the clean translation, in [1, {len(translation.tgt_ids)}], "
                         f"got {target}")
    contrast_id = None
    if contrast is not None:
        contrast_id = tokenizer.piece_to_id(contrast)
        if tokenizer.id_to_piece(contrast_id) != contrast:
            raise ValueError(f"contrast: {contrast!r} is not a piece of this model's vocabulary")
    clean = list(translation.src_ids)
    if noise_word is not None:
        if not 1 <= noise_word <= len(clean) - 1:
            raise ValueError(f"noise_word must be a source piece, in [1, {len(clean) - 1}], got {noise_word}")
        if not (isinstance(noise_std, (int, float)) and math.isfinite(noise_std) and 0 < noise_std <= 100):
            raise ValueError(f"noise_std must be a finite number in (0, 100] (standard deviations), got {noise_std}")
        return Question(clean, clean, list(translation.tgt_ids), target - 1, contrast_id, (noise_word - 1,),
                        embedding_noise_scale(model, noise_std), seed)
    if not isinstance(corrupted, str) or not corrupted.strip():
        raise ValueError("corrupted: give a corrupted sentence (it is empty), or noise on one source word")
    ids = tokenizer.encode(corrupted)[: model.config.max_len - 1] + [tokenizer.eos_id]
    return Question(clean, ids, list(translation.tgt_ids), target - 1, contrast_id)


def patching_analysis(access: ModelAccess, translation: Translation, corrupted: str | None = None, target: int = 1,
                      contrast: str | None = None, analyses=ANALYSES, noise_word: int | None = None,
                      noise_std: float = NOISE_TIMES_STD) -> Patching:
    question = question_of(access, translation, corrupted, target, contrast, noise_word, noise_std)
    return causal_patching(access.model, question, analyses)


ANALYSIS = Analysis("patching", "What causes this word (activation patching)", Patching, patching_analysis,
                    cheap=False, description="the target piece's restored share when one clean value is put back "
                                             "into the corrupted run (causal tracing, head and path patching)")

__all__ = ["ANALYSES", "ANALYSIS", "Patching", "aligned_positions", "causal_patching", "check_analyses",
           "patching_analysis", "patching_json", "question_of"]
