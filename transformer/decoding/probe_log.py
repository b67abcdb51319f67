"""Turns what the probes recorded while a batch was decoded into one array per sentence and probe.

Encoder probes are recorded once for the padded batch; decoder probes once per step, for the rows still
decoding (beam search moves hypotheses between rows). Each sentence's arrays are read back from the rows
its output occupied at each step, so they are exactly those computed while producing that output.
Shapes of the results are given by each probe's `axes` (see core/probes.py).
"""
from __future__ import annotations

import numpy as np
import torch

from ..core.capture import Recording
from ..core.probes import DECODER, ENCODER, PROBES, SOURCE, TARGET


class ProbeLog:
    def __init__(self, names):
        self.probes = [PROBES[name] for name in names]
        self.encoder: dict[str, torch.Tensor] = {}  # name -> (B, L, *per-layer shape)
        self.steps: dict[str, list[torch.Tensor]] = {p.name: [] for p in self.probes if p.stage == DECODER}

    def add_encoder(self, recording: Recording) -> None:
        for probe in self.probes:
            if probe.stage == ENCODER:
                self.encoder[probe.name] = torch.stack(recording.take(probe.name), dim=1).float().cpu()

    def add_step(self, recording: Recording) -> None:
        for probe in self.probes:
            if probe.stage == DECODER:
                stacked = torch.stack(recording.take(probe.name), dim=1)  # (N, L, *per-layer shape)
                # the newest query: the only one with a cache, the last one when the prefix is re-run
                self.steps[probe.name].append(stacked.select(2 + probe.query_axis, -1).float().cpu())

    def sentence(self, index: int, src_length: int, rows_per_step: list[int]) -> dict[str, np.ndarray]:
        out = {}
        for probe in self.probes:
            if probe.stage == ENCODER:
                values = self.encoder[probe.name][index].narrow(1 + probe.query_axis, 0, src_length)
                if probe.keys == SOURCE:
                    values = values[..., :src_length]
            else:
                rows = [self.steps[probe.name][t][row] for t, row in enumerate(rows_per_step)]
                if probe.keys == SOURCE:
                    rows = [r[..., :src_length] for r in rows]
                if probe.keys == TARGET:  # step t saw t + 1 decoder inputs: zeros above the diagonal
                    values = lower_triangle(rows, 1 + probe.query_axis)
                else:
                    values = torch.stack(rows, dim=1 + probe.query_axis)
            out[probe.name] = values.numpy()
        return out


def lower_triangle(rows: list[torch.Tensor], axis: int) -> torch.Tensor:
    """Stacks step t's row (..., t + 1) along `axis` into (..., steps, steps), zeros above the diagonal.
    (Copying into one zeroed tensor: padding each row first costs ~0.2 ms a row in torch 2.13, per step.)"""
    steps = len(rows)
    shape = list(rows[0].shape[:-1]) + [steps]
    shape.insert(axis, steps)
    values = rows[0].new_zeros(shape)
    for t, row in enumerate(rows):
        values.select(axis, t)[..., : row.size(-1)] = row
    return values
