"""Attribution patching (Nanda, 2023; Syed et al., 2023, "Attribution Patching Outperforms Automated Circuit
Discovery"): the first-order estimate of every exact cell from one forward and one backward pass of the corrupted
run. Putting the clean value a back in place of the corrupted value a' changes p by about

    dp/da (at a') . (a - a')

summed over the cell's features (a position's row, a head's slice, a head's keys and values), and divided by
p_clean - p_corrupted it estimates the restored share. It is exact where p is linear in a; where a patch moves
the softmax or a LayerNorm far, it is not, and the comparison with the exact cells (Spearman's rank correlation and
the cells that differ by more than DISAGREE) says how far to trust it on this sentence.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from ...core.patching import patch
from ...core.probes import at_layer
from .exact import HEAD_SITES, PATH_POINTS, TRACE_SITES, Exact, Grid

DISAGREE = 0.2  # |estimate - exact| in restored share above which a cell is marked


def gradients(exact: Exact) -> dict[str, torch.Tensor]:
    """d p_target / d value at every patched point of the corrupted run (point path -> gradient, its shape)."""
    model, runs = exact.model, exact.runs
    kept: dict[str, torch.Tensor] = {}

    def keep(path):
        def leaf(x):
            # a model whose weights need no gradient gives values that need none: the value is made a leaf
            kept[path] = x if x.requires_grad else x.detach().requires_grad_(True)
            return kept[path]
        return leaf

    paths = [at_layer(name, layer) for name in (*TRACE_SITES.values(), *HEAD_SITES.values(), *PATH_POINTS)
             for layer in range(len(exact.clean_values[name]))]
    with torch.inference_mode(False), torch.enable_grad(), runs.corruption(), \
            patch(model, {path: keep(path) for path in paths}):
        p = runs.probability(runs.last_logits(runs.corrupted_src))[0]
        found = [path for path in paths if path in kept]
        grads = torch.autograd.grad(p, [kept[path] for path in found], allow_unused=True)
    return {path: (torch.zeros_like(kept[path]) if g is None else g).detach() for path, g in zip(found, grads)}


def estimate(exact: Exact, exact_grids: list[Grid]) -> list[Grid]:
    """The estimate of each exact grid, cell for cell (NaN where it is NaN)."""
    start = time.perf_counter()
    grads = gradients(exact)
    gap = exact.p_clean - exact.p_corrupted
    out = []
    for grid in exact_grids:
        values = np.full(grid.shares.shape, np.nan)
        for name in grid.points:
            for layer in range(grid.shares.shape[0]):
                path = at_layer(name, layer)
                moved = (grads[path] * (exact.frame(name, layer) - exact.corrupted_values[name][layer])).double()
                values[layer] = np.nan_to_num(values[layer]) + cell_sums(exact, grid, moved)
        values[np.isnan(grid.shares)] = np.nan
        out.append(Grid("attribution", grid.site, grid.points, grid.axes,
                        values / gap if abs(gap) > 1e-9 else np.full_like(values, np.nan), None, 0.0))
    milliseconds = (time.perf_counter() - start) * 1000
    for grid in out:
        grid.milliseconds = milliseconds
    return out


def cell_sums(exact: Exact, grid: Grid, moved: torch.Tensor) -> np.ndarray:
    """One layer's first-order change per cell: per clean source position, or per head."""
    if grid.axes[1] == "position":  # (1, S_c, D) -> one value per clean position
        per_position = moved[0].sum(-1).cpu().numpy()
        row = np.full(grid.shares.shape[1], np.nan)
        for i, j in exact.runs.pairs:
            row[i] = per_position[j]
        return row
    if moved.dim() == 4:  # keys or values (1, H, S, hs)
        return moved[0].sum((1, 2)).cpu().numpy()
    heads = grid.shares.shape[1]  # the concatenated heads (1, T, D)
    return moved[0].view(moved.size(1), heads, -1).sum((0, 2)).cpu().numpy()


def agreement(exact_grids: list[Grid], estimates: list[Grid]) -> tuple[float | None, list[dict]]:
    """Spearman's rank correlation of estimate and exact over every cell both have, and the cells (counted from 1)
    where they differ by more than DISAGREE."""
    exact_values = np.concatenate([g.shares.ravel() for g in exact_grids])
    estimated = np.concatenate([g.shares.ravel() for g in estimates])
    both = ~(np.isnan(exact_values) | np.isnan(estimated))
    correlation = None
    if both.sum() > 2 and np.ptp(exact_values[both]) > 0 and np.ptp(estimated[both]) > 0:
        from scipy.stats import spearmanr  # here: importing scipy.stats takes most of a second of every start-up
        correlation = float(spearmanr(exact_values[both], estimated[both]).statistic)
    marked = []
    for grid, guess in zip(exact_grids, estimates):
        for row, col in zip(*np.nonzero(np.abs(np.nan_to_num(grid.shares - guess.shares)) > DISAGREE)):
            marked.append({"analysis": grid.analysis, "site": grid.site, grid.axes[0]: int(row) + 1,
                           grid.axes[1]: int(col) + 1, "exact": float(grid.shares[row, col]),
                           "estimate": float(guess.shares[row, col])})
    return correlation, marked


__all__ = ["DISAGREE", "agreement", "estimate", "gradients"]
