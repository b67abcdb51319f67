"""Encoder and decoder layers: attention and feed-forward sub-layers with residual connections.

Shapes: B batch, S source length, T target length, D d_model. `norm="pre"` puts LayerNorm before each
sub-layer (x + f(LN(x)), Xiong et al., 2020: trains without warm-up tricks); `"post"` after the residual
add (LN(x + f(x)), the original paper).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention
from .config import ModelConfig
from .half_linear import project
from .probes import Tap, active_patches, add_taps, any_recorded, tap
from .source_attention import SourceProjection

# config.activation -> the function; "swish" is Marian's name for SiLU
ACTIVATION_FUNCTIONS = {"relu": torch.relu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
                        "swish": F.silu, "silu": F.silu}


def build_norm(config: ModelConfig) -> nn.Module:
    """The model's one kind of norm (config.norm_kind): LayerNorm, or RMS norm, which neither centres nor shifts."""
    if config.norm_kind == "rms":
        return nn.RMSNorm(config.d_model, eps=config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


def apply_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`norm(x)` through the functional call, which a decoding step's single position pays less for."""
    if isinstance(norm, nn.RMSNorm):
        return F.rms_norm(x, norm.normalized_shape, norm.weight, norm.eps)
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


class FeedForward(nn.Module):
    """Position-wise feed-forward network, act(x W1 + b1) W2 + b2 with act ReLU (section 3.3) or the configured one;
    gated (`gated_ff`), act(x W_gate + b_gate) * (x W1 + b1) W2 + b2 (Shazeer 2020, "GLU Variants")."""

    records = {"hidden": "the hidden units after the activation (and the gate), (B, T, F)"}

    def __init__(self, config: ModelConfig, side: str = "encoder"):
        super().__init__()
        width = config.stack_of(side).d_ff
        self.fc1 = nn.Linear(config.d_model, width)
        self.fc_gate = nn.Linear(config.d_model, width) if config.gated_ff else None
        self.fc2 = nn.Linear(width, config.d_model)
        self.activation = ACTIVATION_FUNCTIONS[config.activation]
        add_taps(self)

    def forward(self, x):
        if self.fc_gate is not None:
            hidden = self.activation(project(x, self.fc_gate)) * project(x, self.fc1)
        else:
            hidden = self.activation(project(x, self.fc1))
        hidden = tap(self.hidden, hidden)
        return project(hidden, self.fc2)


class Residual(nn.Module):
    """LayerNorm + dropout + residual add around one sub-layer, pre- or post-norm."""

    records = {
        "input": "the residual stream entering the block, (B, T, D)",
        "normed": "the LayerNorm's output, (B, T, D): the sub-layer's input (pre-norm), the block's output (post-norm)",
        "sublayer": "the sub-layer's output before the residual add (W_O's or W_2's), (B, T, D)",
        "sum": "the residual add x + sub-layer(x), (B, T, D)",
    }

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.norm = build_norm(config)
        self.dropout = nn.Dropout(config.dropout)
        self.pre_norm = config.norm == "pre"
        add_taps(self)

    def forward(self, x, sublayer):
        x = tap(self.input, x)
        if self.pre_norm:
            normed = tap(self.normed, self.norm(x))
            out = tap(self.sublayer, self.dropout(sublayer(normed)))
            return tap(self.sum, x + out)
        out = tap(self.sublayer, self.dropout(sublayer(x)))
        total = tap(self.sum, x + out)
        return tap(self.normed, self.norm(total))

    def step(self, x, sublayer):
        """`forward` at inference, with functional calls: one decoding step is a single position, where the
        per-module call overhead costs more than the arithmetic. Dropout is the identity here."""
        if self.pre_norm:
            return x + sublayer(apply_norm(self.norm, x))
        return apply_norm(self.norm, x + sublayer(x))


class EncoderLayer(nn.Module):
    records = {"output": "the layer's output, (B, S, D)"}

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attention = MultiHeadAttention(config, "encoder_self")
        self.feed_forward = FeedForward(config, "encoder")
        self.attention_residual = Residual(config)
        self.feed_forward_residual = Residual(config)
        add_taps(self)

    def forward(self, x, src_mask, bias=None):
        """`bias`: the stack's relative position bias (1, H, S, S), with T5's positions."""
        def attend(h):
            return self.self_attention.attend_to(*self.self_attention.project_self(h), src_mask, bias)

        x = self.attention_residual(x, attend)
        x = self.feed_forward_residual(x, self.feed_forward)
        return tap(self.output, x)


@dataclass
class LayerCache:
    """Keys/values one decoder layer reuses across incremental steps, each (B, H, length, hs)."""

    self_keys: torch.Tensor | None = None
    self_values: torch.Tensor | None = None
    cross_keys: torch.Tensor | None = None  # computed once per sentence from the encoder output
    cross_values: torch.Tensor | None = None
    source: SourceProjection | None = None  # the cross-attention of `DecoderLayer.step`, once per sentence

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Appends the newest positions' self-attention keys/values; returns all of them."""
        if self.self_keys is not None:
            keys = torch.cat([self.self_keys, keys], dim=2)
            values = torch.cat([self.self_values, values], dim=2)
        self.self_keys, self.self_values = keys, values
        return keys, values

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows `rows` (beam search moves hypotheses between rows)."""
        for name in ("self_keys", "self_values", "cross_keys", "cross_values"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.index_select(0, rows))
        if self.source is not None:
            self.source = self.source.reorder(rows)


@dataclass
class DecoderCache:
    layers: list[LayerCache] = field(default_factory=list)
    length: int = 0  # target positions already processed

    def reorder(self, rows: torch.Tensor) -> None:
        for layer in self.layers:
            layer.reorder(rows)


class DecoderLayer(nn.Module):
    records = {"output": "the layer's output, (B, T, D)"}

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attention = MultiHeadAttention(config, "decoder_self")
        self.cross_attention = MultiHeadAttention(config, "cross")
        self.feed_forward = FeedForward(config, "decoder")
        self.self_attention_residual = Residual(config)
        self.cross_attention_residual = Residual(config)
        self.feed_forward_residual = Residual(config)
        add_taps(self)
        # the points `step` does not pass: it adds the residuals functionally and folds the cross-attention's source
        # into its projections (only the probabilities pass)
        self.step_skips = tuple(
            point for module in (self.self_attention_residual, self.cross_attention_residual,
                                 self.feed_forward_residual, self.cross_attention)
            for point in module.children() if isinstance(point, Tap) and point is not self.cross_attention.weights)

    def forward(self, x, memory, src_mask, tgt_mask, cache: LayerCache | None = None, bias=None):
        """With `cache`, one incremental decoding step: through `step`, or through `teacher_forced` on the cache
        where a patch or an open recording must reach a point `step` skips, so every point is recorded at every
        decoding step."""
        if (cache is not None and not self.training and not active_patches.get()
                and not any_recorded(self.step_skips)):
            x = self.step(x, memory, src_mask, cache, bias)
        else:
            x = self.teacher_forced(x, memory, src_mask, tgt_mask, cache, bias)
        return tap(self.output, x)

    def teacher_forced(self, x, memory, src_mask, tgt_mask, cache: LayerCache | None = None, bias=None):
        """`bias`: the decoder's relative position bias (1, H, T, T) for these queries, with T5's positions."""
        def attend_to_prefix(h):
            q, keys, values = self.self_attention.project_self(h)
            if cache is not None:
                keys, values = cache.extend(keys, values)
            return self.self_attention.attend_to(q, keys, values, tgt_mask, bias)

        x = self.self_attention_residual(x, attend_to_prefix)
        x = self.cross_attention_residual(x, lambda h: self.attend_to_source(h, memory, src_mask, cache))
        return self.feed_forward_residual(x, self.feed_forward)

    def step(self, x, memory, src_mask, cache: LayerCache, bias=None):
        """Incremental decoding at inference: the newest positions x attend to the cached prefix. The same
        arithmetic as `forward` (tests hold the two equal), through `Residual.step`, with the cross-attention's
        source folded into its projections (see source_attention.py). No self-attention mask: the cache holds
        only earlier positions, which the new query may all see."""
        def attend_to_prefix(h):
            q, keys, values = self.self_attention.project_self(h)
            return self.self_attention.attend_to(q, *cache.extend(keys, values), None, bias)

        if (
            cache.source is None
            and cache.cross_keys is None
            and SourceProjection.pays_off(self.cross_attention, memory)
        ):
            cache.source = SourceProjection.of(self.cross_attention, memory, src_mask)
        x = self.self_attention_residual.step(x, attend_to_prefix)
        if cache.source is not None:
            x = self.cross_attention_residual.step(x, lambda h: cache.source.attend(self.cross_attention, h))
        else:
            x = self.cross_attention_residual.step(x, lambda h: self.attend_to_source(h, memory, src_mask, cache))
        return self.feed_forward_residual.step(x, self.feed_forward.forward)

    def attend_to_source(self, h, memory, src_mask, cache: LayerCache | None):
        if cache is not None and cache.cross_keys is not None:
            keys, values = cache.cross_keys, cache.cross_values
        else:
            keys, values = self.cross_attention.project_keys_values(memory)
            if cache is not None:
                cache.cross_keys, cache.cross_values = keys, values
        return self.cross_attention.attend_to(self.cross_attention.project_queries(h), keys, values, src_mask)
