"""The corrupted source decoded again with one cell's patch held: what the translation becomes when one encoder
position, one head or one head's reading of the memory is put back from the clean run.

The clean values come from one teacher-forced pass over the whole clean translation, so a decoder-side head
(cross, decoder self) is put back at every position the clean translation has; decoding past its end keeps the
corrupted run's own values there (core/patching.py). Decoding is greedy, the whole prefix re-run at each step (an
open patch steps the cache and the fused kernel aside).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ...core.capture import record
from ...core.head_ref import from_shown, shown
from ...core.patching import Replace, patch
from ...core.probes import at_layer
from ...decoding.strategies.greedy import GreedySettings, decode_greedy
from ...numbers import NumberError, parsed_number
from .exact import HEAD_SITES, PATH_POINTS, TRACE_SITES
from .question import Question, Runs


@dataclass(frozen=True)
class Cell:
    """One cell of a picture, 0-based: (analysis, site, layer, position or head)."""

    analysis: str  # "trace", "heads" or "path"
    site: str
    layer: int
    index: int  # a clean source position (trace) or a head


def parse_hold(text) -> Cell:
    """A cell as people type it, counted from 1: "trace residual 2 5" (layer 2, source position 5),
    "heads cross 1 3" (layer 1, head 3) or "path cross 1 3"; a ValueError says the form. Ranges are checked against
    the model by `check_cell`."""
    parts = text.split() if isinstance(text, str) else []
    sites = {"trace": TRACE_SITES, "heads": HEAD_SITES, "path": {"cross": None}}
    if len(parts) != 4 or parts[0] not in sites or parts[1] not in sites[parts[0]]:
        raise ValueError("hold must be 'trace SITE LAYER POSITION' (SITE: " + ", ".join(TRACE_SITES) + "), 'heads "
                         "KIND LAYER HEAD' (KIND: " + ", ".join(HEAD_SITES) + ") or 'path cross LAYER HEAD', "
                         f"counted from 1; got {text!r}")
    what = "position" if parts[0] == "trace" else "head"
    try:
        layer, index = parsed_number("layer", parts[2], int, 1), parsed_number(what, parts[3], int, 1)
    except NumberError as error:
        raise ValueError(f"hold: {error} (counted from 1)") from None
    return Cell(parts[0], parts[1], from_shown(layer), from_shown(index))


def check_cell(model, question: Question, cell: Cell) -> None:
    """A cell that exists for this model and question, or a ValueError naming the setting and its range from 1."""
    if cell.analysis == "trace":
        layers, count, what = len(model.encoder_layers), len(question.clean_src), "position"
        if cell.site not in TRACE_SITES:
            raise ValueError(f"site: {cell.site!r} is not a trace site; choose one of {', '.join(TRACE_SITES)}")
    elif cell.analysis in ("heads", "path"):
        site = "cross" if cell.analysis == "path" else cell.site
        if site not in HEAD_SITES:
            raise ValueError(f"site: {cell.site!r} is not a head kind; choose one of {', '.join(HEAD_SITES)}")
        stack = model.config.stack_of(site)
        layers, count, what = stack.layers, stack.heads, "head"
    else:
        raise ValueError(f"analysis: {cell.analysis!r} has no cells to hold; choose trace, heads or path")
    if not 0 <= cell.layer < layers:
        raise ValueError(f"layer must be in [1, {layers}], got {shown(cell.layer)}")
    if not 0 <= cell.index < count:
        raise ValueError(f"{what} must be in [1, {count}], got {shown(cell.index)}")


def cell_replacements(runs: Runs, clean: dict, corrupted: dict, cell: Cell) -> dict:
    """The one patch that puts `cell` back into the corrupted run."""
    if cell.analysis == "trace":
        name = TRACE_SITES[cell.site]
        frame = runs.in_corrupted_frame(clean[name][cell.layer], corrupted[name][cell.layer], 1)
        aligned = dict(runs.pairs)
        if cell.index not in aligned:
            raise ValueError(f"position {cell.index + 1} of the clean source lines up with no corrupted position")
        return {at_layer(name, cell.layer): Replace(frame, positions=(aligned[cell.index],))}
    if cell.analysis == "path":
        return {at_layer(name, cell.layer): Replace(runs.in_corrupted_frame(clean[name][cell.layer],
                                                                            corrupted[name][cell.layer], 2),
                                                    heads=(cell.index,)) for name in PATH_POINTS}
    name = HEAD_SITES[cell.site]
    value = clean[name][cell.layer]
    if cell.site == "encoder_self":
        value = runs.in_corrupted_frame(value, corrupted[name][cell.layer], 1)
    return {at_layer(name, cell.layer): Replace(value, heads=(cell.index,))}


def patched_translation(model, question: Question, cell: Cell | None, max_length: int | None = None) -> list[int]:
    """The ids greedy decoding gives the corrupted source with `cell` put back (None: nothing put back)."""
    if cell is not None:
        check_cell(model, question, cell)
    whole = Question(question.clean_src, question.corrupted_src, question.target_ids, len(question.target_ids),
                     question.contrast_id, question.noise_positions, question.noise_scale, question.seed)
    runs = Runs(model, whole)
    names = [*TRACE_SITES.values(), *HEAD_SITES.values(), *PATH_POINTS]
    with torch.inference_mode(False), torch.no_grad():
        replacements = {}
        if cell is not None:
            with record(model, names) as clean_rec:
                runs.clean()
            with record(model, names) as corrupted_rec, runs.corruption():
                runs.last_logits(runs.corrupted_src)
            clean = {n: clean_rec[n] for n in names}
            corrupted = {n: corrupted_rec[n] for n in names}
            replacements = cell_replacements(runs, clean, corrupted, cell)
        with runs.corruption(), (patch(model, replacements) if replacements else runs.corruption()):
            decoded = decode_greedy(model, [question.corrupted_src], GreedySettings(), max_length)[0]
    return decoded.token_ids


__all__ = ["Cell", "check_cell", "parse_hold", "patched_translation"]
