"""Positional encodings: the paper's fixed sinusoids (section 3.5) or a learned table.

Both map positions (T,) to vectors (T, D) that are added to the scaled token embeddings.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .config import ModelConfig


def sinusoidal_table(max_len: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D)); shape (max_len, D).
    `layout="halves"` puts the same sines in the first ceil(D/2) features and the cosines after them, as Marian
    does, computed in float64 as Hugging Face's MarianSinusoidalPositionalEmbedding computes it."""
    if layout == "halves":
        positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
        angles = positions / torch.pow(10000.0, 2 * (torch.arange(d_model, dtype=torch.float64) // 2) / d_model)
        return torch.cat([torch.sin(angles[:, 0::2]), torch.cos(angles[:, 1::2])], dim=1).float()
    positions = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    frequencies = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(positions * frequencies)
    table[:, 1::2] = torch.cos(positions * frequencies)[:, : d_model // 2]
    return table


class SinusoidalPositions(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        # derived from the config, so not saved with the weights
        table = sinusoidal_table(config.max_len, config.d_model, config.sinusoidal_layout)
        self.register_buffer("table", table, persistent=False)

    def forward(self, start: int, length: int) -> torch.Tensor:
        return self.table[start : start + length]


class LearnedPositions(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.embedding = nn.Embedding(config.max_len, config.d_model)

    @property
    def table(self) -> torch.Tensor:
        return self.embedding.weight

    def forward(self, start: int, length: int) -> torch.Tensor:
        return self.embedding.weight[start : start + length]


def build_positions(config: ModelConfig) -> nn.Module:
    return SinusoidalPositions(config) if config.pos_encoding == "sinusoidal" else LearnedPositions(config)
