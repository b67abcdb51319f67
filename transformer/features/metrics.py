"""How well a dictionary explains a set of tokens: the fraction of their variance its reconstructions leave
unexplained, the latents that never fire on them, and how many fire per token (L0).

Shapes: N tokens, D d_model, n latents. Sums run in float64, so a metric over a million tokens is not the rounding
of a million float32 additions.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from .dictionary import DictionaryError, SparseDictionary


def fraction_of_variance_unexplained(x: torch.Tensor, reconstruction: torch.Tensor) -> float:
    """FVU = sum ||x - x̂||² / sum ||x - mean(x)||², the means per feature over the N tokens of x (N, D): 0 for a
    perfect reconstruction, 1 for one no better than the mean token."""
    x, reconstruction = x.double(), reconstruction.double()
    return float(((x - reconstruction) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())


def active_latents(z: torch.Tensor) -> torch.Tensor:
    """(n,) bool: the latents non-zero on at least one token of the codes z (N, n)."""
    return (z != 0).any(0)


def dead_latents(z: torch.Tensor) -> int:
    """How many latents are zero on every token of z (N, n)."""
    return int((~active_latents(z)).sum())


def mean_active_latents(z: torch.Tensor) -> float:
    """L0: the mean count of non-zero latents per token of z (N, n)."""
    return float((z != 0).sum(-1).double().mean())


@dataclass(frozen=True)
class DictionaryMetrics:
    tokens: int  # the tokens measured
    fvu: float  # fraction of variance unexplained
    dead_latents: int  # latents active on none of them
    mean_active_latents: float  # L0

    def to_dict(self) -> dict:
        return asdict(self)


@torch.no_grad()
def measure(dictionary: SparseDictionary, activations: torch.Tensor, batch_size: int = 4096) -> DictionaryMetrics:
    """The three metrics over activations (N, D), encoded `batch_size` tokens at a time."""
    if activations.ndim != 2 or len(activations) == 0:
        raise DictionaryError(f"activations must be a non-empty (tokens, d_model) tensor, got shape "
                              f"{tuple(activations.shape)}")
    x = activations.double()
    error, active, nonzero = 0.0, torch.zeros(dictionary.config.n, dtype=torch.bool), 0
    for start in range(0, len(activations), batch_size):
        batch = activations[start : start + batch_size]
        result = dictionary(batch)
        error += float(((batch.double() - result.reconstruction.double()) ** 2).sum())
        active |= active_latents(result.z).cpu()
        nonzero += int((result.z != 0).sum())
    variance = float(((x - x.mean(0)) ** 2).sum())
    return DictionaryMetrics(len(activations), error / variance, int((~active).sum()), nonzero / len(activations))
