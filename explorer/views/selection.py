"""The shared layer and head controls: their choices, and what they select from a recorded array."""
from __future__ import annotations

import numpy as np

from transformer.core.head_ref import head_label, layer_label

OVERVIEW = "overview"  # every layer x head at once
MEAN, ALL = "mean", "all"  # the mean over heads; every head of a layer, tiled


def layer_choices(n_layers: int) -> list[tuple[str, str]]:
    return [(layer_label(i).capitalize(), str(i)) for i in range(n_layers)] + [
        ("All layers × heads (overview)", OVERVIEW)
    ]


def head_choices(n_heads: int) -> list[tuple[str, str]]:
    return [("Mean over heads", MEAN), ("All heads (tiled)", ALL)] + [
        (head_label(i).capitalize(), str(i)) for i in range(n_heads)
    ]


def valid_layer(layer, n_layers: int) -> str:
    return layer if layer in {str(i) for i in range(n_layers)} | {OVERVIEW} else str(n_layers - 1)


def valid_head(head, n_heads: int) -> str:
    return head if head in {str(i) for i in range(n_heads)} | {MEAN, ALL} else MEAN


def select_heads(weights: np.ndarray, layer: int, head: int | str) -> np.ndarray:
    """(L, H, rows, cols) -> (rows, cols) for one head, or the mean over heads with head='mean'."""
    per_layer = weights[layer]
    return per_layer.mean(axis=0) if head == MEAN else per_layer[int(head)]


def single_layer_and_head(layer: str, head: str, n_layers: int) -> tuple[int, str]:
    """For views that show one map: the overview falls back to the last layer, tiled heads to the mean."""
    return (n_layers - 1 if layer == OVERVIEW else int(layer)), (MEAN if head in (ALL, MEAN) else head)


def head_name(head: str, n_heads: int) -> str:
    return f"mean of {n_heads} heads" if head == MEAN else head_label(int(head))
