"""The exact pictures: the corrupted run with one clean value put back, for every cell, batched.

    causal tracing of the encoder   each encoder layer x source position, one site kind at a time: the residual
                                    stream after the layer (its output), the self-attention's output or the
                                    feed-forward's output before the residual add (Meng et al., 2022)
    head patching                   each head of each kind (cross, encoder self, decoder self): its slice of the
                                    concatenated heads, every position (Wang et al., 2023)
    path patching                   each cross-attention head's keys and values only: the encoder's memory as that
                                    one head reads it, and nothing else the memory feeds

Each site kind is one batched forward pass: row r of the batch is the corrupted source with cell r's value put
back, so a layer's patch is one `torch.where` of a (rows, ...) mask over its tensor. Where only the decoder is
patched (its heads, the cross-attention's keys and values) the corrupted encoder output is computed once and the
batch runs the decoder alone. The restored share of a cell
is (p_patched - p_corrupted) / (p_clean - p_corrupted) of the target piece.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from ...core.patching import patch
from ...core.probes import at_layer
from .question import Runs

TRACE_SITES = {  # site -> the encoder point patched in every layer
    "residual": "encoder.output",
    "attention": "encoder_self_residual.sublayer",
    "feed_forward": "encoder_ff_residual.sublayer",
}
HEAD_SITES = {"cross": "cross.concat", "encoder_self": "encoder_self.concat", "decoder_self": "decoder_self.concat"}
PATH_POINTS = ("cross.keys", "cross.values")
RECORDED = (*TRACE_SITES.values(), *HEAD_SITES.values(), *PATH_POINTS)


@dataclass
class Grid:
    """One picture: a value per (layer, position) or (layer, head), NaN where nothing was patched."""

    analysis: str  # "trace", "heads", "path" or "attribution"
    site: str  # a TRACE_SITES or HEAD_SITES key, or "cross_keys_values"
    points: tuple[str, ...]  # the point patterns written
    axes: tuple[str, str]  # ("layer", "position") or ("layer", "head")
    shares: np.ndarray  # (layers, positions or heads): the restored share
    logit_differences: np.ndarray | None  # the same cells' logit(target) - logit(contrast), with a contrast piece
    milliseconds: float


def share(p: torch.Tensor, p_clean: float, p_corrupted: float) -> np.ndarray:
    gap = p_clean - p_corrupted
    values = p.double().cpu().numpy()
    return (values - p_corrupted) / gap if abs(gap) > 1e-9 else np.full_like(values, np.nan)


class Exact:
    """The clean and corrupted runs' values of every patched point, and the batched patched runs."""

    def __init__(self, runs: Runs, clean_values: dict, corrupted_values: dict, p_clean: float, p_corrupted: float):
        self.runs, self.model = runs, runs.model
        self.clean_values, self.corrupted_values = clean_values, corrupted_values  # point name -> (layers, 1, ...)
        self.p_clean, self.p_corrupted = p_clean, p_corrupted

    def frame(self, name: str, layer: int) -> torch.Tensor:
        """The clean value of `name` at `layer` where the corrupted run holds it (aligned source positions)."""
        clean, corrupted = self.clean_values[name][layer], self.corrupted_values[name][layer]
        if name in (HEAD_SITES["cross"], HEAD_SITES["decoder_self"]):
            return clean  # decoder positions: the same prefix in both runs
        return self.runs.in_corrupted_frame(clean, corrupted, 2 if name in PATH_POINTS else 1)

    def patched(self, replacements: dict, rows: int, decoder_only: bool = False):
        """The target's probability and logit difference in `rows` corrupted runs with `replacements` open;
        `decoder_only`: they patch the decoder alone, so the corrupted encoder output is computed once."""
        if decoder_only:
            self.runs.decoder_last_logits(1)  # the memory, before any patch is open
            with patch(self.model, replacements):
                logits = self.runs.decoder_last_logits(rows)
        else:
            with self.runs.corruption(), patch(self.model, replacements):
                logits = self.runs.last_logits(self.runs.corrupted_src, rows)
        return self.runs.probability(logits), self.runs.logit_difference(logits)

    def grid(self, analysis, site, points, axes, cells, shape, replacements) -> Grid:
        start = time.perf_counter()
        decoder_only = site != "encoder_self" and analysis != "trace"
        p, difference = self.patched(replacements, len(cells), decoder_only)
        shares = np.full(shape, np.nan)
        differences = None if difference is None else np.full(shape, np.nan)
        for row, cell in enumerate(cells):
            shares[cell] = share(p[row: row + 1], self.p_clean, self.p_corrupted)[0]
            if differences is not None:
                differences[cell] = float(difference[row])
        return Grid(analysis, site, points, axes, shares, differences, (time.perf_counter() - start) * 1000)

    def trace(self, site: str) -> Grid:
        """One site kind of the encoder: every layer x aligned source position, in one batched pass."""
        name = TRACE_SITES[site]
        layers, length = len(self.model.encoder_layers), len(self.runs.question.clean_src)
        cells = [(layer, i) for layer in range(layers) for i, _ in self.runs.pairs]
        corrupted_at = dict(self.runs.pairs)
        replacements = {}
        for layer in range(layers):
            mask = torch.zeros(len(cells), len(self.runs.question.corrupted_src), 1, dtype=torch.bool)
            for row, (cell_layer, i) in enumerate(cells):
                if cell_layer == layer:
                    mask[row, corrupted_at[i]] = True
            replacements[at_layer(name, layer)] = self.where(mask, self.frame(name, layer))
        return self.grid("trace", site, (name,), ("layer", "position"), cells, (layers, length), replacements)

    def heads(self, site: str) -> Grid:
        """Every head of one kind, its output alone (its slice of the concatenated heads), in one batched pass."""
        name = HEAD_SITES[site]
        stack = self.model.config.stack_of(site)
        width = stack.head_dim
        cells = [(layer, head) for layer in range(stack.layers) for head in range(stack.heads)]
        replacements = {}
        for layer in range(stack.layers):
            mask = torch.zeros(len(cells), 1, stack.heads * width, dtype=torch.bool)  # the concatenated heads
            for row, (cell_layer, head) in enumerate(cells):
                if cell_layer == layer:
                    mask[row, 0, head * width: (head + 1) * width] = True
            replacements[at_layer(name, layer)] = self.where(mask, self.frame(name, layer))
        return self.grid("heads", site, (name,), ("layer", "head"), cells, (stack.layers, stack.heads), replacements)

    def path(self) -> Grid:
        """Every cross-attention head reading the clean memory (its keys and values), the rest corrupted."""
        stack = self.model.config.decoder
        cells = [(layer, head) for layer in range(stack.layers) for head in range(stack.heads)]
        replacements = {}
        for layer in range(stack.layers):
            mask = torch.zeros(len(cells), stack.heads, 1, 1, dtype=torch.bool)
            for row, (cell_layer, head) in enumerate(cells):
                if cell_layer == layer:
                    mask[row, head] = True
            for name in PATH_POINTS:
                replacements[at_layer(name, layer)] = self.where(mask, self.frame(name, layer))
        return self.grid("path", "cross_keys_values", PATH_POINTS, ("layer", "head"), cells,
                         (stack.layers, stack.heads), replacements)

    def where(self, mask: torch.Tensor, clean: torch.Tensor):
        mask = mask.to(clean.device)
        return lambda x: torch.where(mask, clean, x)


__all__ = ["HEAD_SITES", "PATH_POINTS", "RECORDED", "TRACE_SITES", "Exact", "Grid", "share"]
