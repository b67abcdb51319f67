"""Checkpoint averaging: the element-wise mean of several saved weight sets (Vaswani et al., 2017, 6.1)."""
from __future__ import annotations

import torch


def average_state_dicts(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    if not states:
        raise ValueError("nothing to average: no state dicts given")
    keys = set(states[0])
    for state in states[1:]:
        if set(state) != keys:
            raise ValueError(f"state dicts hold different tensors: {sorted(keys ^ set(state))[:5]}")
    averaged = {}
    for name, first in states[0].items():
        if first.is_floating_point():
            averaged[name] = torch.stack([s[name].float() for s in states]).mean(dim=0).to(first.dtype)
        else:  # integer buffers (counters) are not averaged
            averaged[name] = first.clone()
    return averaged
