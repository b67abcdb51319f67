"""Attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in Transformers"), extended through
cross-attention to say which source pieces each target position draws on.

Residual convention. A sub-layer computes x + attention(x), so a position's new state is half what it
attended to and half itself: per encoder layer l

    A_hat_l = 0.5 * mean_h(A_l) + 0.5 * I          (S, S), rows still sum to 1

and the rollout multiplies the layers, latest on the left, R = A_hat_L ... A_hat_2 A_hat_1: R[i, j] is the
share of source piece j in encoder output position i. Layer norms and feed-forward blocks are ignored,
as in the paper.

Cross-attention. Every decoder layer's cross-attention reads the same encoder output, so cross layers do
not chain into one another and there is nothing to multiply across them: each is a separate reading of
the memory. The default averages them over layers and heads, C = mean_l mean_h(cross_l) (T, S); "last"
or a layer index picks one. No identity is added: the residual around cross-attention carries the
target-side state, not source. The source attribution of target position t is then (C R)[t], a
distribution over source pieces (each row sums to 1).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..decoding.trace import Translation

RESIDUAL_WEIGHT = 0.5  # the share Abnar & Zuidema give the residual path in every layer


@dataclass
class Rollout:
    encoder: np.ndarray  # (S, S): row i = what encoder output i is made of, over source pieces
    source: np.ndarray  # (T, S): row t = what target position t draws on, over source pieces
    rows: list[str]  # target pieces (the token each position predicted)
    cols: list[str]  # source pieces
    cross_layers: str | int


def encoder_rollout(encoder_self: np.ndarray) -> np.ndarray:
    """(L, H, S, S) encoder self-attention -> (S, S) rollout."""
    weights = np.asarray(encoder_self, dtype=np.float64)
    identity = np.eye(weights.shape[-1])
    rollout = identity
    for layer in weights:
        rollout = ((1 - RESIDUAL_WEIGHT) * layer.mean(axis=0) + RESIDUAL_WEIGHT * identity) @ rollout
    return rollout


def cross_reading(cross: np.ndarray, cross_layers: str | int = "mean") -> np.ndarray:
    """(L, H, T, S) -> (T, S): head-averaged cross-attention of every layer averaged ("mean"), of the last
    layer ("last"), or of one layer (an index, 0-based)."""
    weights = np.asarray(cross, dtype=np.float64).mean(axis=1)  # (L, T, S)
    if cross_layers == "mean":
        return weights.mean(axis=0)
    if cross_layers == "last":
        return weights[-1]
    if isinstance(cross_layers, int) and not isinstance(cross_layers, bool) and 0 <= cross_layers < len(weights):
        return weights[cross_layers]
    raise ValueError(f"cross_layers must be 'mean', 'last' or a layer in [0, {len(weights) - 1}], got {cross_layers!r}")


def source_rollout(encoder_self: np.ndarray, cross: np.ndarray, cross_layers: str | int = "mean") -> np.ndarray:
    """(L, H, S, S) and (L, H, T, S) -> (T, S) source attribution of every target position."""
    return cross_reading(cross, cross_layers) @ encoder_rollout(encoder_self)


def rollout(translation: Translation, cross_layers: str | int = "mean") -> Rollout:
    """Rollout of a translation made with capture=True (it needs encoder_self and cross)."""
    missing = [kind for kind in ("encoder_self", "cross") if kind not in translation.recorded]
    if missing:
        raise ValueError(f"rollout needs {missing} recorded; translate with capture=True")
    encoder_self, cross = translation.recorded["encoder_self"], translation.recorded["cross"]
    encoder = encoder_rollout(encoder_self.values)
    return Rollout(encoder, cross_reading(cross.values, cross_layers) @ encoder, list(cross.rows), list(cross.cols),
                   cross_layers)


__all__ = ["RESIDUAL_WEIGHT", "Rollout", "cross_reading", "encoder_rollout", "rollout", "source_rollout"]
