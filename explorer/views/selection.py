"""The shared layer and head controls: their choices, and what they select from a recorded array.

The encoder and the decoder may have stacks of different shapes (ModelConfig.encoder, .decoder): the controls offer
the widest stack's layers and heads (`widest`), and each view fits the choice to its own kind's array (`fit`)."""
from __future__ import annotations

import numpy as np

from transformer.core.head_ref import head_label, layer_label
from transformer.core.probes import ATTENTION_KINDS

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


def widest(recorded: dict) -> tuple[int, int]:
    """(layers, heads) of the widest stack among a translation's recorded attention kinds, (L, H, rows, cols) each."""
    shapes = [recorded[kind].values.shape[:2] for kind in ATTENTION_KINDS]
    return max(layers for layers, _ in shapes), max(heads for _, heads in shapes)


def fit(layer: str, head: str, n_layers: int, n_heads: int) -> tuple[str, str]:
    """The choice within an array of `n_layers` layers of `n_heads` heads: a layer beyond them becomes its last
    layer, a head beyond them the mean over its heads."""
    if layer != OVERVIEW and int(layer) >= n_layers:
        layer = str(n_layers - 1)
    if head not in (MEAN, ALL) and int(head) >= n_heads:
        head = MEAN
    return layer, head


def valid_layer(layer, n_layers: int) -> str:
    return layer if layer in {str(i) for i in range(n_layers)} | {OVERVIEW} else str(n_layers - 1)


def valid_head(head, n_heads: int) -> str:
    return head if head in {str(i) for i in range(n_heads)} | {MEAN, ALL} else MEAN


def select_heads(weights: np.ndarray, layer: int, head: int | str) -> np.ndarray:
    """(L, H, rows, cols) -> (rows, cols) for one head, or the mean over heads with head='mean'."""
    per_layer = weights[layer]
    return per_layer.mean(axis=0) if head == MEAN else per_layer[int(head)]


def single_layer_and_head(layer: str, head: str, shape: tuple[int, int]) -> tuple[int, str]:
    """For views that show one map of an array of `shape` (layers, heads): the overview falls back to the last
    layer, tiled heads to the mean, and a choice beyond the array as `fit` says."""
    n_layers, n_heads = shape
    layer, head = fit(layer, head, n_layers, n_heads)
    return (n_layers - 1 if layer == OVERVIEW else int(layer)), (MEAN if head in (ALL, MEAN) else head)


def head_name(head: str, n_heads: int) -> str:
    return f"mean of {n_heads} heads" if head == MEAN else head_label(int(head))
