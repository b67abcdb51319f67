"""Attention capture by forward hooks.

    with capture_attention(model) as att:
        model(src, tgt)
    att.encoder_self   # (layers, B, H, S, S)
    att.decoder_self   # (layers, B, H, T, T)
    att.cross          # (layers, B, H, T, S)

The hooks exist only inside the block and are removed in `finally`, also when the block raises.
Each capture asks (through a ContextVar) for the explicit softmax path of the model's attention
modules in the current thread only, and its hooks record only calls made from that same context, so
several threads sharing one model each see exactly their own attention.
"""
from __future__ import annotations

import contextlib
import threading
from collections import defaultdict

import torch
from torch import nn

from .attention import ATTENTION_KINDS, AttentionProbabilities, probabilities_requested


class AttentionRecord:
    """Probabilities recorded per attention kind, in call order (one entry per layer per forward call)."""

    def __init__(self, n_layers: int):
        self.n_layers = n_layers
        self.calls: dict[str, list[torch.Tensor]] = defaultdict(list)

    def _stacked(self, kind: str) -> torch.Tensor | None:
        calls = self.calls.get(kind)
        if not calls:
            return None
        if len(calls) != self.n_layers:
            raise RuntimeError(
                f"{len(calls)} {kind} calls were recorded; this view expects one forward pass "
                f"({self.n_layers} layers). Use take('{kind}') to read step-by-step recordings."
            )
        return torch.stack(calls)

    @property
    def encoder_self(self) -> torch.Tensor | None:
        return self._stacked("encoder_self")

    @property
    def decoder_self(self) -> torch.Tensor | None:
        return self._stacked("decoder_self")

    @property
    def cross(self) -> torch.Tensor | None:
        return self._stacked("cross")

    def take(self, kind: str) -> list[torch.Tensor]:
        """Returns and forgets what was recorded for `kind` so far (used between decoding steps)."""
        return self.calls.pop(kind, [])


@contextlib.contextmanager
def capture_attention(model: nn.Module, kinds=ATTENTION_KINDS):
    unknown = set(kinds) - set(ATTENTION_KINDS)
    if unknown:
        raise ValueError(f"unknown attention kinds {sorted(unknown)}; choose from {ATTENTION_KINDS}")
    points = [m for m in model.modules() if isinstance(m, AttentionProbabilities) and m.kind in kinds]
    if not points:
        raise ValueError("the model has no AttentionProbabilities modules to capture")
    n_layers = max(sum(1 for m in points if m.kind == kind) for kind in kinds)
    record = AttentionRecord(n_layers)
    owner = threading.get_ident()
    point_ids = frozenset(id(m) for m in points)

    def hook(module, inputs, probabilities):
        # other threads run through the same modules while this capture is open: skip their calls
        if threading.get_ident() == owner and id(module) in probabilities_requested.get():
            record.calls[module.kind].append(probabilities.detach())

    handles = []
    token = probabilities_requested.set(probabilities_requested.get() | point_ids)
    try:
        handles = [m.register_forward_hook(hook) for m in points]
        yield record
    finally:
        for handle in handles:
            handle.remove()
        probabilities_requested.reset(token)
