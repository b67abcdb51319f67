"""Similar heads: heads ranked by how alike their maps are (AttentionViz's users asked for it).

Every head of one kind maps the same sampled tokens (store.py: one sample per side), so two maps can be compared
point by point without aligning them: for each point, the share of its k nearest points on one map that are also
among its k nearest on the other. That neighbourhood overlap is 1 for maps that differ by a rotation, a reflection,
a scale or a shift (as two runs of t-SNE or PCA of one head may) and about k / n for unrelated maps.
"""
from __future__ import annotations

import numpy as np

NEIGHBOURS = 10


def neighbourhoods(coordinates: np.ndarray, k: int = NEIGHBOURS) -> np.ndarray:
    """(n, k) each point's k nearest other points on one map, by Euclidean distance."""
    from scipy.spatial import cKDTree

    k = min(k, len(coordinates) - 1)
    _, rows = cKDTree(coordinates).query(coordinates, k=k + 1)
    return np.sort(rows[:, 1:], axis=1)  # the point itself is its own nearest (ties aside): dropped


def overlap(first: np.ndarray, second: np.ndarray) -> float:
    """Mean share of shared neighbours between two (n, k) neighbourhood tables of the same points."""
    shared = (first[:, :, None] == second[:, None, :]).sum(axis=(1, 2))  # (n,): rows hold distinct points
    return float(shared.mean() / first.shape[1])


def similarity_matrix(maps: list[list]) -> np.ndarray:
    """maps[layer][head] (HeadMap) -> (L*H, L*H) neighbourhood overlaps, heads in layer-major order."""
    tables = [neighbourhoods(head.coordinates) for row in maps for head in row]
    count = len(tables)
    matrix = np.eye(count)
    for i in range(count):
        for j in range(i + 1, count):
            matrix[i, j] = matrix[j, i] = overlap(tables[i], tables[j])
    return matrix


def ranked(matrix: np.ndarray, head: int, heads_per_layer: int) -> list[tuple[int, int, float]]:
    """The other heads by similarity to `head` (layer-major index), most alike first: (layer, head, overlap),
    0-based."""
    order = [int(i) for i in np.argsort(-matrix[head], kind="stable") if i != head]
    return [(i // heads_per_layer, i % heads_per_layer, float(matrix[head, i])) for i in order]
