"""Cross-attention for incremental decoding, with the source folded into the projections once per sentence.

Shapes: B batch rows, H heads, S source length, D d_model, hs head size, W_q,h / b_q,h head h's query rows of
the stacked projection, K_h / V_h its source keys / values (S, hs), W_o,h its columns of the output projection.

At one new query position per step, the cross-attention of head h is

    scores_h = (x W_q,h^T + b_q,h) K_h^T / sqrt(hs) = x (W_q,h^T K_h^T / sqrt(hs)) + b_q,h K_h^T / sqrt(hs)
    output   = sum_h softmax(scores_h) (V_h W_o,h^T) + b_o

The bracketed matrices depend only on the source, so `SourceProjection.of` computes them when a sentence starts,
and each step is then two small batched products (x (1 x D) against D x (H S), probabilities (1 x H S) against
(H S) x D) instead of two D x D projections and the head reshuffling around them. Tests hold this equal to the
teacher-forced `MultiHeadAttention.forward`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .attention import MultiHeadAttention
from .head_mask import heads_to_zero
from .probes import tap


@dataclass
class SourceProjection:
    scores_weight: torch.Tensor  # (B, D, H * S): W_q,h^T K_h^T / sqrt(hs), heads side by side
    scores_bias: torch.Tensor  # (B, 1, H * S): b_q,h K_h^T / sqrt(hs), the smallest float where a key is padding
    output_weight: torch.Tensor  # (B, H * S, D): V_h W_o,h^T, heads stacked
    heads: int

    @staticmethod
    def pays_off(attention: MultiHeadAttention, memory: torch.Tensor) -> bool:
        """Whether folding reads less per step: it stores H x as much per row (B H S D against B S D for the
        keys and values) but skips the two D x D projections, so it wins for few rows of short sources (one
        sentence, a beam of 4) and loses for corpus batches. Per step: 2 B H S D < 2 D D + 2 B S D."""
        batch, length, d = memory.shape
        return batch * length * (attention.n_heads - 1) < d

    @classmethod
    def of(
        cls, attention: MultiHeadAttention, memory: torch.Tensor, src_mask: torch.Tensor | None
    ) -> "SourceProjection":
        """memory (B, S, D) is the encoder output; src_mask (B, 1, 1, S), True for real keys, or None."""
        batch, length, d = memory.shape
        heads, inner = attention.n_heads, attention.inner
        head_size = inner // heads
        keys, values = attention.project_keys_values(memory)  # (B, H, S, hs) each
        query_weight = attention.in_proj.weight[:inner].view(heads, head_size, d)  # (H, hs, D)
        query_bias = attention.in_proj.bias[:inner].view(heads, 1, head_size)  # (H, 1, hs)
        scale = 1.0 / math.sqrt(head_size) if attention.scaled else 1.0
        scores_weight = torch.einsum("hkd,bhsk->bdhs", query_weight, keys).reshape(batch, d, heads * length) * scale
        scores_bias = torch.einsum("hok,bhsk->bohs", query_bias, keys).reshape(batch, 1, heads * length) * scale
        if src_mask is not None:
            padding = ~src_mask.view(batch, 1, 1, length).expand(batch, 1, heads, length).reshape(batch, 1, -1)
            scores_bias = scores_bias.masked_fill(padding, torch.finfo(scores_bias.dtype).min)
        output_columns = attention.out_proj.weight.view(d, heads, head_size)  # (D, H, hs)
        output_weight = torch.einsum("bhsk,dhk->bhsd", values, output_columns).reshape(batch, heads * length, d)
        return cls(scores_weight, scores_bias, output_weight, heads)

    def reorder(self, rows: torch.Tensor) -> "SourceProjection":
        return SourceProjection(self.scores_weight.index_select(0, rows), self.scores_bias.index_select(0, rows),
                                self.output_weight.index_select(0, rows), self.heads)

    def attend(self, attention: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
        """x (B, 1, D), the normalised newest position -> the cross-attention sub-layer's output (B, 1, D)."""
        batch = x.size(0)
        scores = torch.baddbmm(self.scores_bias, x, self.scores_weight).view(batch, self.heads, 1, -1)  # (B, H, 1, S)
        probabilities = scores.softmax(dim=-1)
        probabilities = tap(attention.weights, probabilities)
        masked = heads_to_zero(attention)
        if masked:
            keep = torch.ones(self.heads, dtype=probabilities.dtype, device=probabilities.device)
            keep[list(masked)] = 0
            probabilities = probabilities * keep[:, None, None]
        return torch.baddbmm(attention.out_proj.bias, probabilities.view(batch, 1, -1), self.output_weight)
