"""Activation patching: the points that can be recorded (probes.py) can be written, while a block runs.

    with record(model, "encoder.output") as clean:            # a clean run's value of every encoder layer's output
        model(clean_src, tgt)
    with patch(model, {"encoder_layers.2.output": Replace(clean["encoder_layers.2.output"][0], positions=[3])}):
        logits = model(corrupted_src, tgt)                    # the corrupted run with one position put back

    with patch(model, {"cross.concat": lambda x: x * 0}, heads=[1]):   # every decoder layer's cross head 2 silenced
        translator.translate(...)                             # decoding honours it too

A point is any name `record` accepts: a module path, a pattern with `*` or `**`, or a short name (`cross.keys`). Its
replacement is a tensor, or a function of the point's tensor that returns one. A tensor with one more axis than the
point's value, as `record` returns a name's values stacked over its points, gives each point its own row. `heads`
and `positions` (0-based) replace only those heads and positions and keep the rest: the axes come from the shape
legend each point declares (`(B, H, Tq, hs)`: heads on H, positions on Tq); the concatenated heads (`concat`,
(B, Tq, D)) select a head's slice of D. A batch of 1 is broadcast over the rows.

In decoding (decoding/step_decoder.py) an open patch makes each step re-run the whole prefix, teacher-forced, and
the fused kernel steps aside, so a patched decoder position is the same position at every step as in one
teacher-forced pass; a replacement longer than the prefix so far is cut to it, and one shorter than the prefix
replaces its first positions only. Patches sit in a ContextVar, like
recordings: a patch changes only the passes of the context that opened it, and nothing is paid when none is open.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from ..choices import type_phrase
from .probes import Tap, active_patches, name_list, points_of

POSITION_AXES = ("T", "S", "Tq", "Tk")  # the shape legends' names of a position axis


@dataclass(frozen=True)
class Replace:
    """One point's replacement: a tensor, or a function of the point's tensor, kept at `heads` and `positions` only
    (0-based; None: all of them)."""

    value: torch.Tensor | Callable[[torch.Tensor], torch.Tensor]
    heads: tuple[int, ...] | None = None
    positions: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Axes:
    """Where a point's tensor holds its positions and heads, read off its shape legend."""

    rank: int
    position: int | None
    head: int | None  # the H axis, or the feature axis of the concatenated heads (then `head_width` is set)
    heads: int  # how many heads the point holds (0: none)
    head_width: int = 0


def axes_of(model: nn.Module, point: Tap) -> Axes:
    legend = re.search(r"\((B(?:, \w+)*)\)", point.about)
    if legend is None:
        raise ValueError(f"{point.name} declares no shape legend, so it cannot be patched")
    names = legend.group(1).split(", ")
    position = next((i for i, name in enumerate(names) if name in POSITION_AXES), None)
    parent = model.get_submodule(point.name.rpartition(".")[0]) if "." in point.name else model
    heads = getattr(parent, "n_heads", 0)
    if "H" in names:
        return Axes(len(names), position, names.index("H"), heads)
    if point.name.endswith(".concat"):
        return Axes(len(names), position, len(names) - 1, heads, parent.inner // heads)
    return Axes(len(names), position, None, 0)


def indices(argument: str, values, limit: int | None = None) -> tuple[int, ...] | None:
    """A list of 0-based indices, checked: each an int in [0, limit) when a limit is known."""
    if values is None:
        return None
    if isinstance(values, int) and not isinstance(values, bool):
        values = [values]
    if not isinstance(values, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                        for v in values):
        raise TypeError(f"{argument} must be a list of 0-based indices (ints), got {type_phrase(values)}")
    bad = [v for v in values if v < 0 or (limit is not None and v >= limit)]
    if bad:
        allowed = f"[0, {limit - 1}]" if limit is not None else "0 or more"
        raise ValueError(f"{argument}: {bad} out of range; each must be in {allowed} (0-based)")
    return tuple(values)


class Patch:
    """The replacements one `patch` block holds, by point: what `tap` asks while the block runs."""

    def __init__(self, model: nn.Module, replacements: dict, heads=None, positions=None):
        if not isinstance(replacements, dict) or not replacements:
            raise TypeError(f"replacements must be a non-empty dict of point name -> tensor, function or Replace, "
                            f"got {type_phrase(replacements)}")
        found = points_of(model, name_list("replacements", list(replacements)))
        self.rules: dict[int, tuple[Replace, torch.Tensor | Callable, Axes, str]] = {}
        for name, given in replacements.items():
            rule = given if isinstance(given, Replace) else Replace(given, heads, positions)
            points = found[name]
            for number, point in enumerate(points):
                axes = axes_of(model, point)
                if rule.heads is not None and axes.head is None:
                    raise ValueError(f"{point.name} holds no heads, so heads cannot be selected there")
                indices(f"heads at {point.name}", rule.heads, axes.heads)
                indices(f"positions at {point.name}", rule.positions)
                self.rules[id(point)] = (rule, self._value(rule.value, axes, number, len(points), name), axes,
                                         point.name)
        self.module_ids = frozenset(self.rules)

    @staticmethod
    def _value(value, axes: Axes, number: int, count: int, name: str):
        if callable(value):
            return value
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"the replacement of {name!r} must be a tensor or a function, got {type_phrase(value)}")
        if value.dim() == axes.rank + 1:  # stacked over the name's points, as `record` returns them
            if value.size(0) != count:
                raise ValueError(f"the replacement of {name!r} stacks {value.size(0)} values for its {count} points")
            return value[number]
        return value

    def replace(self, point: Tap, x: torch.Tensor) -> torch.Tensor:
        """The value the pass goes on with at `point`, whose own value is x."""
        rule, value, axes, name = self.rules[id(point)]
        new = value(x) if callable(value) else value
        new = new.to(device=x.device, dtype=x.dtype)
        if axes.position is not None and new.dim() == x.dim() and new.size(axes.position) != x.size(axes.position):
            have, need = new.size(axes.position), x.size(axes.position)
            if have > need:  # decoding: the prefix so far
                new = new.narrow(axes.position, 0, need)
            else:  # decoding past the replacement's positions: those after it keep their own value
                new = torch.cat([new.expand(*x.shape[:axes.position], have, *x.shape[axes.position + 1:]),
                                 x.narrow(axes.position, have, need - have)], axes.position)
        try:
            torch.broadcast_shapes(new.shape, x.shape)
        except RuntimeError:
            raise ValueError(f"the replacement at {name} has shape {tuple(new.shape)}; the point holds "
                             f"{tuple(x.shape)} ({point.about})") from None
        if rule.heads is None and rule.positions is None:
            return new.expand_as(x)
        return torch.where(self.mask(rule, axes, x), new, x)

    @staticmethod
    def mask(rule: Replace, axes: Axes, x: torch.Tensor) -> torch.Tensor:
        """True where the replacement is kept: the selected heads and positions, broadcastable to x."""
        keep = torch.ones((1,) * x.dim(), dtype=torch.bool, device=x.device)
        if rule.positions is not None:
            along = torch.zeros(x.size(axes.position), dtype=torch.bool, device=x.device)
            along[[p for p in rule.positions if p < along.numel()]] = True  # positions not decoded yet: none
            keep = keep & along.view([-1 if a == axes.position else 1 for a in range(x.dim())])
        if rule.heads is not None:
            along = torch.zeros(axes.heads, dtype=torch.bool, device=x.device)
            along[list(rule.heads)] = True
            if axes.head_width:
                along = along.repeat_interleave(axes.head_width)  # a head's slice of the concatenated heads
            keep = keep & along.view([-1 if a == axes.head else 1 for a in range(x.dim())])
        return keep


@contextlib.contextmanager
def patch(model: nn.Module, replacements: dict, heads=None, positions=None):
    """Replaces the points `replacements` names (name -> tensor, function or `Replace`) while the block runs, in this
    context only. `heads` and `positions` (0-based) apply to the bare tensors and functions. Yields the `Patch`."""
    opened = Patch(model, replacements, heads, positions)
    token = active_patches.set(active_patches.get() + (opened,))
    try:
        yield opened
    finally:
        active_patches.reset(token)


__all__ = ["Patch", "Replace", "axes_of", "patch"]
