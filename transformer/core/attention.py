"""Multi-head attention (Vaswani et al., 2017, section 3.2).

Shapes: B batch, H heads, Tq query positions, Tk key positions, D d_model, hs head size (D / H).
Masks are boolean, broadcastable to (B, H, Tq, Tk), True where a query may look at a key.

Two numerically equivalent paths: the fused `scaled_dot_product_attention` (fast, never materialises
the probabilities) and an explicit softmax whose probabilities pass through the `weights` point (probes.py), the
stable place where `capture_attention` hangs its forward hooks. The explicit path runs only for modules whose scores
or probabilities the current context records or patches, so with no capture there is no extra cost.
Both paths honour the heads that `head_mask.heads_masked` switched off in the current context.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .half_linear import project
from .head_mask import heads_to_zero
from .probes import ATTENTION_KINDS, add_taps, is_listened, is_recorded, tap


def transported_norms(values: torch.Tensor, output_weight: torch.Tensor) -> torch.Tensor:
    """The norm of what each head moves from each key position, ‖f_h(x_j)‖ with f_h(x_j) = (x_j W_v,h + b_v,h) W_o,h:
    its value vector through the head's columns of the output projection. Weighted by the attention,
    ‖α_ij f_h(x_j)‖ = α_ij ‖f_h(x_j)‖ is norm-based attention (Kobayashi et al., 2020, "Attention is Not Only a
    Weight"). values (B, H, Tk, hs), output_weight (D, D) -> (B, H, Tk)."""
    heads, head_size = values.size(1), values.size(-1)
    columns = output_weight.view(-1, heads, head_size)  # (D, H, hs)
    return torch.einsum("bhtk,dhk->bhtd", values, columns).norm(dim=-1)


def explicit_attention(q, k, v, mask, dropout_p: float = 0.0, points=None, bias=None, scaled: bool = True):
    """Returns (output (B, H, Tq, hs), probabilities (B, H, Tq, Tk)). `points`: the attention's Taps, for the
    scores before and after the mask and the probabilities. `bias` (1 or B, H, Tq, Tk), T5's relative position bias,
    is added to the scores; `scaled=False` leaves out the 1/sqrt(hs) (T5)."""
    scores = q @ k.transpose(-2, -1)
    if scaled:
        scores = scores / math.sqrt(q.size(-1))
    if bias is not None:
        scores = scores + bias
    if points is not None:
        scores = tap(points.scores, scores)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    if points is not None:
        scores = tap(points.masked_scores, scores)
    probabilities = scores.softmax(dim=-1)
    if points is not None:
        probabilities = tap(points.weights, probabilities)
    weights = F.dropout(probabilities, dropout_p) if dropout_p > 0 else probabilities
    return weights @ v, probabilities


class MultiHeadAttention(nn.Module):
    """Queries, keys and values come from one stacked projection `in_proj` (D -> 3D, rows q | k | v, the layout of
    `torch.nn.MultiheadAttention`): self-attention runs it once per call, cross-attention projects its queries
    with the first third and the encoder output, once per sentence, with the other two."""

    records = {
        "queries": "each head's queries, (B, H, Tq, hs)",
        "keys": "each head's keys, (B, H, Tk, hs)",
        "values": "each head's value vectors, (B, H, Tk, hs)",
        "scores": "q·k / sqrt(hs) before any mask (no sqrt(hs) without attention_scale; plus the relative position "
                  "bias with T5's positions), (B, H, Tq, Tk)",
        "masked_scores": "the scores with masked keys at the dtype's lowest value, (B, H, Tq, Tk)",
        "weights": "the attention probabilities, a softmax over the keys, (B, H, Tq, Tk)",
        "heads": "each head's weighted sum of values, (B, H, Tq, hs)",
        "concat": "the heads concatenated, before the output projection, (B, Tq, D)",
        "transported": "the norm of what each head moves from each key (transported_norms), (B, H, Tk)",
    }

    def __init__(self, config: ModelConfig, kind: str):
        super().__init__()
        if kind not in ATTENTION_KINDS:
            raise ValueError(f"attention kind must be one of {ATTENTION_KINDS}, got {kind!r}")
        d = config.d_model
        self.kind = kind
        stack = config.stack_of(kind)
        self.n_heads = stack.heads
        self.inner = stack.heads * stack.head_dim  # d_model, except where the config sets its own head_dim (T5)
        self.in_proj = nn.Linear(d, 3 * self.inner)
        self.in_proj.stacked_projections = 3  # initialised as three matrices (see Transformer._init_weights)
        self.out_proj = nn.Linear(self.inner, d)
        add_taps(self)
        self.scaled = config.attention_scale
        self.attention_dropout = config.attention_dropout
        self.fused = True  # like nanoGPT's `self.flash`; tests switch it off to compare the two paths

    def split_heads(self, x: torch.Tensor, parts: int) -> tuple[torch.Tensor, ...]:
        """(B, T, parts * D) -> `parts` tensors (B, H, T, hs), views of x."""
        batch, length, width = x.shape
        stacked = x.view(batch, length, parts, self.n_heads, width // (parts * self.n_heads))
        return stacked.permute(2, 0, 3, 1, 4).unbind(0)  # parts x (B, H, T, hs)

    def project_self(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Queries, keys and values of x (B, T, D) in one matrix product, each (B, H, T, hs)."""
        return self.split_heads(project(x, self.in_proj), 3)

    def project_queries(self, x: torch.Tensor) -> torch.Tensor:
        return self.split_heads(project(x, self.in_proj, slice(0, self.inner)), 1)[0]

    def project_keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of `source` (B, Tk, D), each (B, H, Tk, hs): cacheable across decoding steps."""
        return self.split_heads(project(source, self.in_proj, slice(self.inner, None)), 2)

    def attend_to(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None,
                  bias: torch.Tensor | None = None):
        """Attention of queries q (B, H, Tq, hs) over keys/values, heads merged and projected: (B, Tq, D). `bias`:
        the relative position bias added to the scores (1, H, Tq, Tk), with T5's positions."""
        dropout_p = self.attention_dropout if self.training else 0.0
        if is_recorded(self.transported):
            self.transported(transported_norms(values, self.out_proj.weight))
        q, keys, values = tap(self.queries, q), tap(self.keys, keys), tap(self.values, values)
        if self.fused and not any(map(is_listened, (self.weights, self.scores, self.masked_scores))):
            if bias is not None:  # SDPA adds a float mask to the scores: the bias, and the lowest value where masked
                mask = bias if mask is None else bias.masked_fill(~mask, torch.finfo(bias.dtype).min)
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=dropout_p,
                                                 scale=None if self.scaled else 1.0)
        else:
            out, _ = explicit_attention(q, keys, values, mask, dropout_p, self, bias, self.scaled)
        masked = heads_to_zero(self)
        if masked:
            # out of place, so autograd still sees the attention output it saved
            keep = torch.ones(self.n_heads, dtype=out.dtype, device=out.device)
            keep[list(masked)] = 0
            out = out * keep[:, None, None]  # (B, H, Tq, hs)
        out = tap(self.heads, out)
        batch, _, length, _ = out.shape
        out = tap(self.concat, out.transpose(1, 2).reshape(batch, length, -1))  # (B, Tq, D)
        return project(out, self.out_proj)

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None,
                bias: torch.Tensor | None = None):
        return self.attend_to(self.project_queries(x), keys, values, mask, bias)


def stack_separate_projections(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`state` with the separate q_proj, k_proj and v_proj tensors that checkpoints written before the projections
    were stacked hold replaced by their stacked `in_proj`; other state dicts come back unchanged."""
    state = dict(state)
    for name in [n for n in state if n.endswith("q_proj.weight")]:
        prefix = name[: -len("q_proj.weight")]
        for field in ("weight", "bias"):
            parts = [state.pop(f"{prefix}{p}_proj.{field}") for p in "qkv"]
            state[f"{prefix}in_proj.{field}"] = torch.cat(parts)
    return state
