"""A recordable point in the forward pass: `Tap` passes its input through unchanged, so a forward hook (core/capture.py)
can record it under the probe name the module carries. `tap(module, x)` calls it only while a recording in this
context listens, so with nothing recorded the forward pass does no extra work."""
from __future__ import annotations

import torch
from torch import nn

from .probes import is_recorded


class Tap(nn.Module):
    def __init__(self, probe: str):
        super().__init__()
        self.probe = probe

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def extra_repr(self) -> str:
        return f"probe={self.probe!r}"


def tap(module: Tap, x: torch.Tensor) -> None:
    if is_recorded(module):
        module(x)
