"""Where each token is: the positional encodings added to the embeddings (the paper's sinusoids in three layouts, a
learned table, or none) and T5's relative position bias, added to the attention scores instead.

Shapes: D d_model, H heads, Tq query positions, Tk key positions.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .config import ModelConfig


def sinusoidal_table(max_len: int, d_model: int, layout: str = "interleaved") -> torch.Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D)); shape (max_len, D).
    `layout="halves"` puts the same sines in the first ceil(D/2) features and the cosines after them, as Marian
    does, computed in float64 as Hugging Face's MarianSinusoidalPositionalEmbedding computes it. `layout="fairseq"`:
    sin(pos w_i) in the first D/2 features and cos(pos w_i) after them, w_i = 10000^(-i / (D/2 - 1)), in float32 as
    fairseq and Hugging Face's M2M100SinusoidalPositionalEmbedding compute it (a zero feature last for odd D)."""
    if layout == "fairseq":
        half = d_model // 2
        frequencies = torch.exp(torch.arange(half, dtype=torch.int64).float() * -(math.log(10000) / (half - 1)))
        angles = torch.arange(max_len, dtype=torch.int64).float().unsqueeze(1) * frequencies.unsqueeze(0)
        table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
        return torch.cat([table, torch.zeros(max_len, 1)], dim=1) if d_model % 2 else table
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
        self.config = config
        # derived from the config, so not saved with the weights; on the meta device (Transformer.empty, which
        # computes it once the model has memory) only its shape: computing it there would import torch._dynamo
        on_meta = torch.empty(0).is_meta
        table = torch.empty(config.max_len, config.d_model) if on_meta else self.computed()
        self.register_buffer("table", table, persistent=False)

    def computed(self) -> torch.Tensor:
        """The table; `table[0]` is the first token's position, the full table's row `position_offset`."""
        config, offset = self.config, self.config.position_offset
        return sinusoidal_table(config.max_len + offset, config.d_model, config.sinusoidal_layout)[offset:]

    def forward(self, start: int, length: int) -> torch.Tensor:
        return self.table[start : start + length]


class LearnedPositions(nn.Module):
    """A trained table of max_len + position_offset rows (BART's and mBART's first two rows are never read)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.offset = config.position_offset
        self.embedding = nn.Embedding(config.max_len + self.offset, config.d_model)

    @property
    def table(self) -> torch.Tensor:
        """The rows positions 0, 1, ... read."""
        return self.embedding.weight[self.offset:]

    def forward(self, start: int, length: int) -> torch.Tensor:
        return self.embedding.weight[self.offset + start : self.offset + start + length]


class NoPositions(nn.Module):
    """No absolute positions (T5's relative positions live in the attention's bias): zeros, so every view and the
    embedding sum read the same shapes."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.register_buffer("table", self.computed(), persistent=False)

    def computed(self) -> torch.Tensor:
        return torch.zeros(self.config.max_len, self.config.d_model)

    def forward(self, start: int, length: int) -> torch.Tensor:
        return self.table[start : start + length]


def build_positions(config: ModelConfig) -> nn.Module:
    kinds = {"sinusoidal": SinusoidalPositions, "learned": LearnedPositions, "relative": NoPositions}
    return kinds[config.pos_encoding](config)


def relative_buckets(distance: torch.Tensor, bidirectional: bool, buckets: int, max_distance: int) -> torch.Tensor:
    """Key - query distances -> T5's buckets (Raffel et al. 2020; Mesh TensorFlow's `_relative_position_bucket`): half
    the buckets (of each direction, when bidirectional) for exact distances, the rest logarithmic up to
    max_distance, beyond which all distances share the last. A decoder (not bidirectional) sees only the past."""
    bucket = torch.zeros_like(distance)
    if bidirectional:
        buckets //= 2
        bucket += (distance > 0).long() * buckets
        distance = distance.abs()
    else:
        distance = -distance.clamp(max=0)
    exact = buckets // 2
    # clamped at 1 where the distance is exact anyway (log 0 would be -inf), so every value computed is finite
    logarithmic = exact + (torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
                           * (buckets - exact)).long()
    return bucket + torch.where(distance < exact, distance, logarithmic.clamp(max=buckets - 1))


class RelativePositionBias(nn.Module):
    """One stack's learned bias per head and distance bucket, added to every self-attention score of the stack (T5
    computes it in the first layer and shares it with the others)."""

    def __init__(self, config: ModelConfig, heads: int, bidirectional: bool):
        super().__init__()
        self.embedding = nn.Embedding(config.relative_buckets, heads)
        self.bidirectional, self.max_distance = bidirectional, config.relative_max_distance

    def forward(self, query_start: int, query_length: int, key_length: int) -> torch.Tensor:
        """The bias of queries query_start.. over keys 0..key_length-1: (1, H, Tq, Tk)."""
        device = self.embedding.weight.device
        queries = torch.arange(query_start, query_start + query_length, device=device)[:, None]
        distance = torch.arange(key_length, device=device)[None, :] - queries  # (Tq, Tk)
        bucket = relative_buckets(distance, self.bidirectional, self.embedding.num_embeddings, self.max_distance)
        return self.embedding(bucket).permute(2, 0, 1).unsqueeze(0)
