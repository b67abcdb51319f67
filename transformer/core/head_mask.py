"""Switching attention heads off (head masking, Michel et al., 2019, "Are Sixteen Heads Really Better than One?").

A masked head still computes its attention probabilities (a capture still records them), but its output,
the per-head weighted sum of values before the output projection, is replaced by zeros. The layer then
sees only the other heads' contributions plus the output projection's bias.

    with heads_masked(model, [("cross", 1, 0), ("encoder_self", 0, 3)]):   # (kind, layer, head), 0-based
        model(src, tgt)

Like the recordings in `probes.py`, the mask lives in a ContextVar for the duration of the block, never
on the modules: two requests sharing one model each see exactly their own mask, and nothing is left
behind when the block exits (also when it raises). Nested blocks add to the heads already masked.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from numbers import Integral
from types import MappingProxyType

from torch import nn

from .head_ref import HeadRef
from .probes import ATTENTION_KINDS

HeadKey = HeadRef  # (attention kind, layer, head), both indices 0-based; a plain tuple works too

# id(attention module) -> the heads of that module to zero in this context; empty when nothing is masked
masked_heads: ContextVar[Mapping[int, frozenset[int]]] = ContextVar("masked_heads", default=MappingProxyType({}))


class HeadMaskError(ValueError):
    """A heads_off entry that is malformed or out of range; the message names it and the allowed ranges."""


def heads_to_zero(module: nn.Module) -> frozenset[int]:
    """The heads of `module` masked in this context (one dict lookup, so free when nothing is masked)."""
    masks = masked_heads.get()
    return masks.get(id(module), frozenset()) if masks else frozenset()


def attention_modules(model: nn.Module) -> dict[str, list[nn.Module]]:
    """Every multi-head attention module by kind, layer order (the order `model.modules()` registers them)."""
    by_kind: dict[str, list[nn.Module]] = {kind: [] for kind in ATTENTION_KINDS}
    for module in model.modules():
        kind = getattr(module, "kind", None)
        if kind in by_kind and hasattr(module, "n_heads"):
            by_kind[kind].append(module)
    return by_kind


def _ranges(by_kind: dict[str, list[nn.Module]]) -> str:
    return "; ".join(f"{kind}: layer 0-{len(mods) - 1}, head 0-{mods[0].n_heads - 1}"
                     for kind, mods in by_kind.items() if mods)


def _is_index(value) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def check_heads_off(model: nn.Module, heads_off: Iterable | None) -> list[HeadKey]:
    """`heads_off` as a list of (kind, layer, head) tuples, duplicates removed in order; HeadMaskError names the
    first bad entry and what the model allows. Entries may be lists (as JSON delivers them) or tuples."""
    if heads_off is None or (isinstance(heads_off, (list, tuple)) and not heads_off):
        return []  # nothing to check: every translation passes here, and listing the modules is not free
    by_kind = attention_modules(model)
    allowed = f"each entry must be (kind, layer, head) with kind one of {list(ATTENTION_KINDS)}; {_ranges(by_kind)}"
    if isinstance(heads_off, (str, bytes)) or not isinstance(heads_off, Iterable):
        raise HeadMaskError(f"heads_off must be a list of (kind, layer, head) entries, got {heads_off!r}; {allowed}")
    checked: list[HeadKey] = []
    for entry in heads_off:
        well_formed = (isinstance(entry, (list, tuple)) and len(entry) == 3
                       and isinstance(entry[0], str) and entry[0] in by_kind
                       and _is_index(entry[1]) and _is_index(entry[2]))
        if well_formed:
            modules = by_kind[entry[0]]
            well_formed = 0 <= entry[1] < len(modules) and 0 <= entry[2] < modules[entry[1]].n_heads
        if not well_formed:
            raise HeadMaskError(f"heads_off entry {entry!r} is not valid: {allowed}")
        key = (entry[0], int(entry[1]), int(entry[2]))
        if key not in checked:
            checked.append(key)
    return checked


@contextlib.contextmanager
def heads_masked(model: nn.Module, heads_off: Iterable | None):
    """Zeroes the outputs of the heads `heads_off` lists while the block runs, in this context only. Yields the
    checked list of (kind, layer, head). With nothing to mask the context is left untouched."""
    checked = check_heads_off(model, heads_off)
    if not checked:
        yield checked
        return
    by_kind = attention_modules(model)
    masks = {key: set(value) for key, value in masked_heads.get().items()}
    for kind, layer, head in checked:
        masks.setdefault(id(by_kind[kind][layer]), set()).add(head)
    token = masked_heads.set(MappingProxyType({key: frozenset(value) for key, value in masks.items()}))
    try:
        yield checked
    finally:
        masked_heads.reset(token)


def heads_masked_now(model: nn.Module) -> list[HeadKey]:
    """Every head of `model` switched off in this context (by any enclosing `heads_masked`), as (kind, layer,
    head), for an analysis that reads recorded weights (a capture records a masked head's weights too)."""
    masks = masked_heads.get()
    if not masks:
        return []
    return [(kind, layer, head) for kind, modules in attention_modules(model).items()
            for layer, module in enumerate(modules) for head in sorted(masks.get(id(module), ()))]


__all__ = ["HeadKey", "HeadMaskError", "attention_modules", "check_heads_off", "heads_masked", "heads_masked_now",
           "heads_to_zero"]
