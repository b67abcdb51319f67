"""Recording by forward hooks on the points the model declares (see `probes.py`).

    with capture_attention(model) as att:        # the three attention kinds
        model(src, tgt)
    att.encoder_self   # (layers, B, H, S, S)
    att.decoder_self   # (layers, B, H, T, T)
    att.cross          # (layers, B, H, T, S)

    with record(model, ["cross", "decoder_ff.hidden", "decoder_layers.1.cross_attention.scores"]) as rec:
        model(src, tgt)
    rec["decoder_ff.hidden"]                     # (layers, B, T, F)
    rec["decoder_layers.1.cross_attention.scores"][0]   # (B, H, T, S): one point, one entry

    with record(translator.model, ["decoder_layers.1.output", "logits"]) as rec:
        translator.translate("A dog runs.")
    rec.take("logits")                           # one (1, 1, V) per decoding step: each passes every decoder point

Reading a name whose points nothing in the block reached is a NotReached error naming them, never None or [].

The hooks exist only inside the block and are removed in `finally`, also when the block raises. The
recording itself sits in a ContextVar for the duration of the block: a hook keeps a call only when its
recording is open in the context that made the call. Other threads running the same model therefore
record nothing into it, while a worker thread that was handed this context (`asyncio.to_thread`,
`contextvars.copy_context().run`) records into it as if it were the caller.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

from ..choices import type_phrase
from .probes import ATTENTION_KINDS, PROBES, Tap, active_recordings, matcher, name_list, nearest, points_of


class NotReached(LookupError):
    """A recorded name read after a block that never reached its points: silence would read as "nothing there"."""


class Recording:
    """What the points recorded, in call order: (path, tensor) per call, one per point per forward pass."""

    def __init__(self, found: dict[str, list[Tap]]):
        self.found = found  # each name asked for -> its points
        unique = {id(point): point for points in found.values() for point in points}
        self.module_ids = frozenset(unique)
        self.paths = [point.name for point in unique.values()]  # what one forward pass records, once each
        self.calls: list[tuple[str, torch.Tensor]] = []
        self.found_paths: dict[str, frozenset[str]] = {}  # name -> the recorded paths it matches
        self.reached: set[str] = set()  # the paths recorded at least once, also those `take` has since forgotten

    def add(self, path: str, value: torch.Tensor) -> None:
        self.calls.append((path, value.detach()))
        self.reached.add(path)

    def _paths(self, name: str) -> frozenset[str]:
        if name not in self.found_paths:
            match = matcher(name).fullmatch
            self.found_paths[name] = frozenset(path for path in self.paths if match(path))
        return self.found_paths[name]

    def _recorded_paths(self, name: str) -> frozenset[str]:
        """The recorded paths `name` matches; a name that matches none (misspelt, or not asked for) is a KeyError
        naming what this recording holds, never an empty answer that reads as "nothing ran"."""
        if not isinstance(name, str):
            raise TypeError(f"a recording is read by name (a string), got {type_phrase(name)}")
        paths = self._paths(name)
        if not paths:
            raise KeyError(f"{name!r} was not recorded{nearest(name, [*self.found, *self.paths])}; this recording "
                           f"holds {list(self.found)} ({len(self.paths)} points, e.g. {self.paths[:2]})")
        return paths

    def _matching(self, name: str) -> list[int]:
        """The calls recorded for `name` and not yet taken; a name none of whose points the block reached is
        NotReached, naming them and how to read them."""
        paths = self._recorded_paths(name)
        if not paths & self.reached:
            points = sorted(paths)
            named = repr(points[0]) + (f" and {len(points) - 1} more points" if len(points) > 1 else "")
            raise NotReached(
                f"{name!r}: nothing that ran while this recording was open reached {named}. A decoding step passes "
                f"every decoder point (translate() records each at every step), the encoder passes its own once per "
                f"sentence; a teacher-forced pass, model(src, tgt), passes every point once")
        return [i for i, (path, _) in enumerate(self.calls) if path in paths]

    def __getitem__(self, name: str) -> torch.Tensor | None:
        """One forward pass's tensors for `name`, stacked over its points (the layers), in the model's order; None
        once `take` has forgotten them. A name that was not recorded is a KeyError, one whose points the block never
        reached is NotReached."""
        calls = [self.calls[i][1] for i in self._matching(name)]
        if not calls:
            return None
        expected = len(self._paths(name))
        if len(calls) != expected:
            raise RuntimeError(
                f"{len(calls)} {name} calls were recorded; this view expects one forward pass "
                f"({expected} points). Use take('{name}') to read step-by-step recordings."
            )
        return torch.stack(calls)

    def _kind(self, kind: str) -> torch.Tensor | None:
        return self[kind] if self._paths(kind) else None  # an attention kind not asked for reads as None

    @property
    def encoder_self(self) -> torch.Tensor | None:
        return self._kind("encoder_self")

    @property
    def decoder_self(self) -> torch.Tensor | None:
        return self._kind("decoder_self")

    @property
    def cross(self) -> torch.Tensor | None:
        return self._kind("cross")

    def take(self, name: str) -> list[torch.Tensor]:
        """Returns and forgets what was recorded for `name` so far, in call order (used between decoding steps): one
        tensor per decoding step for a decoder point; [] only when an earlier `take` has forgotten them all. A name
        whose points nothing reached is NotReached."""
        taken = set(self._matching(name))
        out = [value for i, (_, value) in enumerate(self.calls) if i in taken]
        self.calls = [call for i, call in enumerate(self.calls) if i not in taken]
        return out


AttentionRecord = Recording  # the name the first version of the package exported


@contextlib.contextmanager
def record(model: nn.Module, names=ATTENTION_KINDS):
    """Records every point `names` find (probes.pattern) while the block runs, in this context only."""
    recording = Recording(points_of(model, name_list("names", names)))

    def hook(module, inputs, output):
        if recording in active_recordings.get():
            recording.add(module.name, output)

    handles = []
    token = active_recordings.set(active_recordings.get() + (recording,))
    try:
        handles = [point.register_forward_hook(hook)
                   for point in {id(p): p for points in recording.found.values() for p in points}.values()]
        yield recording
    finally:
        for handle in handles:
            handle.remove()
        active_recordings.reset(token)


def capture_attention(model: nn.Module, kinds=ATTENTION_KINDS):
    """`record` restricted to attention probabilities: one kind ("cross") or a list of them."""
    kinds = name_list("kinds", kinds)
    not_attention = [kind for kind in kinds if kind not in ATTENTION_KINDS]
    if not_attention:
        named = ", ".join(repr(kind) + nearest(kind, ATTENTION_KINDS) for kind in not_attention)
        raise ValueError(f"kinds: unknown attention kinds {named}; choose from {list(ATTENTION_KINDS)}")
    return record(model, kinds)


__all__ = ["PROBES", "AttentionRecord", "NotReached", "Recording", "capture_attention", "record"]
