"""What the model can record, and the names that find it.

Each module declares the values it can record in a `records` class attribute (point -> what it holds), as Hugging
Face's models declare `_can_record_outputs`; `add_taps(module)` gives it one pass-through `Tap` per point, and its
forward pass hands the value to `tap(self.<point>, value)`. A point is named by its module path in the model, as
TransformerLens names its hook points (`blocks.0.attn.hook_pattern`): `encoder_layers.2.self_attention.weights` is
the third encoder layer's self-attention probabilities. No table lists the points: `recordable(model)` reads them
off the model.

Callers ask for a name or a pattern: a path with `*` for one part (any layer), `**` for any path, or a short form
where a site of SITES stands for its modules in every layer (`cross.weights` is
`decoder_layers.*.cross_attention.weights`). PROBES names the five sets the views assemble per sentence (the three
attention kinds and each stack's layer outputs) and says how.

The same points can be written: `patching.patch(model, {name: value or function})` replaces a point's value while
its block runs (activation patching), through the same `tap` call, which returns the value the pass goes on with.

The ContextVars hold the recordings and patches open in the current context. They travel with the context (threads,
asyncio tasks, worker threads started with the context copied), so several requests sharing one model each see
exactly their own recordings and patches, and `tap` costs two ContextVar reads when none is open.
"""
from __future__ import annotations

import difflib
import functools
import re
from contextvars import ContextVar
from dataclasses import dataclass

import torch
from torch import nn

from ..choices import type_phrase

ENCODER, DECODER = "encoder", "decoder"
SOURCE, TARGET = "source", "target"

# the one table of short names: a site's modules, one per layer ("*"); every point they declare is "<site>.<point>"
SITES = {
    ENCODER: "encoder_layers.*",
    DECODER: "decoder_layers.*",
    "encoder_self": "encoder_layers.*.self_attention",
    "encoder_self_residual": "encoder_layers.*.attention_residual",
    "encoder_ff": "encoder_layers.*.feed_forward",
    "encoder_ff_residual": "encoder_layers.*.feed_forward_residual",
    "decoder_self": "decoder_layers.*.self_attention",
    "decoder_self_residual": "decoder_layers.*.self_attention_residual",
    "cross": "decoder_layers.*.cross_attention",
    "cross_residual": "decoder_layers.*.cross_attention_residual",
    "decoder_ff": "decoder_layers.*.feed_forward",
    "decoder_ff_residual": "decoder_layers.*.feed_forward_residual",
}


@dataclass(frozen=True)
class Probe:
    """A set of points the views assemble into one array per sentence while decoding."""

    name: str
    points: str  # the short name of its points
    title: str
    stage: str  # ENCODER: recorded once over the source; DECODER: one new query position per decoding step
    query_axis: int  # axis of the query position in one layer's recorded tensor, batch axis excluded
    keys: str | None  # what the last axis is: SOURCE or TARGET (decoder inputs) tokens, or None (features)
    axes: tuple[str, ...]  # the axes of the assembled per-sentence array, layer first
    attention: bool  # recorded from an attention softmax, so the explicit attention path must run
    row_title: str
    col_title: str


_ATTENTION_AXES = ("layer", "head", "query", "key")
_STATE_AXES = ("layer", "position", "feature")

PROBES: dict[str, Probe] = {p.name: p for p in (
    Probe("encoder_self", "encoder_self.weights", "Encoder self-attention", ENCODER, 1, SOURCE, _ATTENTION_AXES,
          True, "query: source token", "key: source token"),
    Probe("decoder_self", "decoder_self.weights", "Decoder masked self-attention", DECODER, 1, TARGET,
          _ATTENTION_AXES, True, "query: the token it predicted", "key: decoder input (<s>, then the tokens fed back)"),
    Probe("cross", "cross.weights", "Cross-attention (decoder → encoder)", DECODER, 1, SOURCE, _ATTENTION_AXES, True,
          "query: the token it predicted", "key: source token"),
    Probe("encoder_hidden", "encoder.output", "Encoder layer outputs", ENCODER, 0, None, _STATE_AXES, False,
          "position: source token", "feature"),
    Probe("decoder_hidden", "decoder.output", "Decoder layer outputs (before the final norm)", DECODER, 0, None,
          _STATE_AXES, False, "position: the token it predicted", "feature"),
    # what enters and leaves each encoder layer's self-attention residual: ALTI+ reads the encoder decoding ran
    Probe("encoder_residual_input", "encoder_self_residual.input", "Encoder self-attention residual inputs", ENCODER,
          0, None, _STATE_AXES, False, "position: source token", "feature"),
    Probe("encoder_residual_sum", "encoder_self_residual.sum", "Encoder self-attention residual sums", ENCODER, 0,
          None, _STATE_AXES, False, "position: source token", "feature"),
)}
ATTENTION_KINDS = tuple(name for name, probe in PROBES.items() if probe.attention)


class Tap(nn.Module):
    """A recordable point: passes its input through unchanged, so a forward hook (core/capture.py) records it under
    `name`, its module path, which `name_taps` sets once the model is built."""

    def __init__(self, about: str):
        super().__init__()
        self.about = about  # what it holds, with its shape
        self.name = ""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def extra_repr(self) -> str:
        return f"{self.about!r}"


def add_taps(module: nn.Module) -> None:
    """One Tap per point `module`'s class declares in `records`, as an attribute of that name."""
    for point, about in type(module).records.items():
        module.add_module(point, Tap(about))


def name_taps(model: nn.Module) -> None:
    for path, module in model.named_modules():
        if isinstance(module, Tap):
            module.name = path


def recordable(model: nn.Module) -> dict[str, str]:
    """Every point the model can record: path -> what it holds."""
    return {module.name: module.about for module in model.modules() if isinstance(module, Tap)}


# the recordings open in this context; each knows the ids of the Taps it listens to
active_recordings: ContextVar[tuple] = ContextVar("active_recordings", default=())


def is_recorded(point: Tap) -> bool:
    """Whether an open recording in this context listens to `point` (cheap when none is open)."""
    return any_recorded((point,))


def any_recorded(points) -> bool:
    """Whether an open recording in this context listens to one of `points` (one ContextVar read when none is)."""
    recordings = active_recordings.get()
    return bool(recordings) and any(id(point) in r.module_ids for r in recordings for point in points)


# the patches open in this context (core/patching.py); each knows the ids of the Taps it replaces
active_patches: ContextVar[tuple] = ContextVar("active_patches", default=())


def is_patched(point: Tap) -> bool:
    """Whether an open patch in this context replaces `point`'s value (cheap when none is open)."""
    patches = active_patches.get()
    return bool(patches) and any(id(point) in p.module_ids for p in patches)


def is_listened(point: Tap) -> bool:
    """Whether a recording reads `point` or a patch writes it: the explicit paths must then reach it."""
    return is_recorded(point) or is_patched(point)


def tap(point: Tap, x: torch.Tensor) -> torch.Tensor:
    """x, or its replacement where an open patch writes `point`; handed to `point` while a recording listens (after
    any patch, so a recording sees what the pass goes on with). With neither open the forward pass does no extra
    work: two ContextVar reads. Every call site goes on with what this returns (`q = tap(self.queries, q)`)."""
    patches = active_patches.get()
    if patches:
        for opened in patches:
            if id(point) in opened.module_ids:
                x = opened.replace(point, x)
    if is_recorded(point):
        point(x)
    return x


def pattern(name: str) -> str:
    """A name as a module-path pattern: a probe's points, a site's short form expanded."""
    if name in PROBES:
        name = PROBES[name].points
    site, dot, rest = name.partition(".")
    return SITES[site] + dot + rest if site in SITES else name


def at_layer(name: str, layer: int) -> str:
    """The path of `name`'s point in one layer (0-based): at_layer("cross.keys", 2) is
    "decoder_layers.2.cross_attention.keys"."""
    return pattern(name).replace("*", str(layer), 1)


@functools.lru_cache(maxsize=512)
def matcher(name: str) -> re.Pattern:
    parts = (".*" if part == "**" else "[^.]+" if part == "*" else re.escape(part) for part in pattern(name).split("."))
    return re.compile(r"\.".join(parts))


def name_list(argument: str, names) -> tuple[str, ...]:
    """The one reading of a name or a list of names (probes, sites' points, module paths): a str is one name, never
    its letters; a list or tuple holds strings. Anything else is a TypeError naming `argument` and the bad item."""
    if isinstance(names, str):
        return (names,)
    if not isinstance(names, (list, tuple)):
        raise TypeError(f"{argument} must be a name or a list of names (strings), got {type_phrase(names)}")
    for number, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(f"{argument} must be a name or a list of names (strings); item {number} is "
                            f"{type_phrase(name)} ({name!r})")
    return tuple(names)


def nearest(name: str, candidates) -> str:
    """" (did you mean 'cross.weights'?)" for the closest of `candidates`, or "" when none is close."""
    close = difflib.get_close_matches(name, list(dict.fromkeys(candidates)), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def short_names(taps) -> list[str]:
    """Every name a caller may ask for: the probes, each site's points in short form, and the points' paths."""
    sites = [f"{site}.{point}" for tap in taps for parent, _, point in [tap.name.rpartition(".")]
             for site, where in SITES.items() if matcher(where).fullmatch(parent)]
    return [*PROBES, *sites, *(tap.name for tap in taps)]


def points_of(model: nn.Module, names) -> dict[str, list[Tap]]:
    """The Taps each name finds, in the model's order; a name that finds none is refused with the nearest valid names
    and examples. Kept on the model per set of names (its Taps are made with it), so a translation's recording does
    not search again."""
    names = name_list("names", names)
    cache = model.__dict__.setdefault("_found_points", {})
    if names in cache:
        return cache[names]
    taps = [m for m in model.modules() if isinstance(m, Tap)]
    found = {name: [t for t in taps if matcher(name).fullmatch(t.name)] for name in names}
    missing = [name for name, points in found.items() if not points]
    if missing:
        valid = short_names(taps)
        raise ValueError(
            f"the model records nothing named {', '.join(repr(m) + nearest(m, valid) for m in missing)}; ask for a "
            f"probe ({', '.join(PROBES)}), a site's point (e.g. cross.weights, encoder_ff.hidden) or a module path "
            f"such as {taps[0].name if taps else '-'}"
        )
    cache[names] = found
    return found


def check_probe_names(names, argument: str = "record") -> tuple[str, ...]:
    """Names of PROBES, the sets decoding assembles per sentence: one name or a list (`name_list`); an unknown one is
    named with the nearest probe."""
    names = name_list(argument, names)
    unknown = [name for name in names if name not in PROBES]
    if unknown:
        raise ValueError(f"{argument}: unknown probes {', '.join(repr(u) + nearest(u, PROBES) for u in unknown)}; "
                         f"the model declares {list(PROBES)}")
    return names
