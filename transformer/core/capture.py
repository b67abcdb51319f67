"""Recording by forward hooks on the probe points the model declares (see `probes.py`).

    with capture_attention(model) as att:        # the three attention kinds
        model(src, tgt)
    att.encoder_self   # (layers, B, H, S, S)
    att.decoder_self   # (layers, B, H, T, T)
    att.cross          # (layers, B, H, T, S)

    with record(model, ["cross", "decoder_hidden"]) as rec:
        model(src, tgt)
    rec["decoder_hidden"]                        # (layers, B, T, D)

The hooks exist only inside the block and are removed in `finally`, also when the block raises. The
recording itself sits in a ContextVar for the duration of the block: a hook keeps a call only when its
recording is open in the context that made the call. Other threads running the same model therefore
record nothing into it, while a worker thread that was handed this context (`asyncio.to_thread`,
`contextvars.copy_context().run`) records into it as if it were the caller.
"""
from __future__ import annotations

import contextlib
from collections import defaultdict

import torch
from torch import nn

from .probes import ATTENTION_KINDS, PROBES, TEACHER_FORCED_PROBES, active_recordings, check_probe_names


class Recording:
    """Tensors recorded per probe name, in call order (one entry per layer per forward call)."""

    def __init__(self, names: tuple[str, ...], layers: dict[str, int], module_ids: frozenset[int]):
        self.names = names
        self.layers = layers  # name -> how many modules record it: one forward pass's calls (stacks may differ)
        self.module_ids = module_ids
        self.calls: dict[str, list[torch.Tensor]] = defaultdict(list)

    def add(self, name: str, value: torch.Tensor) -> None:
        self.calls[name].append(value.detach())

    def __getitem__(self, name: str) -> torch.Tensor | None:
        """One forward pass's tensors for `name`, stacked over layers."""
        calls = self.calls.get(name)
        if not calls:
            return None
        if len(calls) != self.layers.get(name):
            raise RuntimeError(
                f"{len(calls)} {name} calls were recorded; this view expects one forward pass "
                f"({self.layers.get(name)} layers). Use take('{name}') to read step-by-step recordings."
            )
        return torch.stack(calls)

    @property
    def encoder_self(self) -> torch.Tensor | None:
        return self["encoder_self"]

    @property
    def decoder_self(self) -> torch.Tensor | None:
        return self["decoder_self"]

    @property
    def cross(self) -> torch.Tensor | None:
        return self["cross"]

    def take(self, name: str) -> list[torch.Tensor]:
        """Returns and forgets what was recorded for `name` so far (used between decoding steps)."""
        return self.calls.pop(name, [])


AttentionRecord = Recording  # the name the first version of the package exported


@contextlib.contextmanager
def record(model: nn.Module, names=ATTENTION_KINDS):
    """Records every module whose `probe` is one of `names` while the block runs, in this context only."""
    names = check_probe_names(names, (*PROBES, *TEACHER_FORCED_PROBES))
    points = [m for m in model.modules() if getattr(m, "probe", None) in names]
    if not points:
        raise ValueError(f"the model has no modules for the probes {list(names)}")
    layers = {name: sum(1 for m in points if m.probe == name) for name in names}
    recording = Recording(names, layers, frozenset(id(m) for m in points))

    def hook(module, inputs, output):
        if recording in active_recordings.get():
            recording.add(module.probe, output)

    handles = []
    token = active_recordings.set(active_recordings.get() + (recording,))
    try:
        handles = [m.register_forward_hook(hook) for m in points]
        yield recording
    finally:
        for handle in handles:
            handle.remove()
        active_recordings.reset(token)


def capture_attention(model: nn.Module, kinds=ATTENTION_KINDS):
    """`record` restricted to attention probabilities."""
    not_attention = sorted(set(kinds) - set(ATTENTION_KINDS))
    if not_attention:
        raise ValueError(f"unknown attention kinds {not_attention}; choose from {ATTENTION_KINDS}")
    return record(model, kinds)


__all__ = ["PROBES", "AttentionRecord", "Recording", "capture_attention", "record"]
