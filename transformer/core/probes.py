"""What the model can record: named probe points that the model declares and `record` reads.

Like Hugging Face's `_can_record_outputs`, the declaration lives with the model, not with whoever
captures: a module records under the name in its `probe` attribute, and `Transformer.PROBES` says what
each name holds. Recording a new quantity (say, every encoder layer's output) means giving a module a
`probe` name and declaring it here; decoding, the trace and the views then pick it up by name.

The ContextVar holds the recordings that are open in the current context. It travels with the
context (threads, asyncio tasks, and worker threads started with the context copied), so several
requests sharing one model each see exactly their own recordings.
"""
from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

ENCODER, DECODER = "encoder", "decoder"
SOURCE, TARGET = "source", "target"


@dataclass(frozen=True)
class Probe:
    name: str
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
    Probe("encoder_self", "Encoder self-attention", ENCODER, 1, SOURCE, _ATTENTION_AXES, True,
          "query: source token", "key: source token"),
    Probe("decoder_self", "Decoder masked self-attention", DECODER, 1, TARGET, _ATTENTION_AXES, True,
          "query: the token it predicted", "key: decoder input (<s>, then the tokens fed back)"),
    Probe("cross", "Cross-attention (decoder → encoder)", DECODER, 1, SOURCE, _ATTENTION_AXES, True,
          "query: the token it predicted", "key: source token"),
    Probe("encoder_hidden", "Encoder layer outputs", ENCODER, 0, None, _STATE_AXES, False,
          "position: source token", "feature"),
    Probe("decoder_hidden", "Decoder layer outputs (before the final norm)", DECODER, 0, None, _STATE_AXES, False,
          "position: the token it predicted", "feature"),
)}
ATTENTION_KINDS = tuple(name for name, probe in PROBES.items() if probe.attention)
# recorded only in a teacher-forced pass, never while decoding: per attention kind, the norm of what each head moves
# from each key position, (layers, B, heads, keys) (attention.TransportedNorms, analysis/norms.py); each head's
# queries and keys, (layers, B, heads, positions, head size) (attention.Vectors, analysis/query_key.py)
NORM_PROBES = tuple(f"{kind}_norms" for kind in ATTENTION_KINDS)
VECTOR_PROBES = tuple(f"{kind}_{part}" for kind in ATTENTION_KINDS for part in ("queries", "keys"))
# every intermediate of the forward pass, for the walk-through of one translation (analysis/walkthrough/): recorded
# in a teacher-forced pass only, by pass-through `Tap` modules (core/tap.py) that run only while a recording listens.
# name -> what it holds; B batch, T positions, D d_model, H heads, hs head size, F d_ff, V vocabulary. Per-layer
# probes are recorded once per layer, the others once per pass (read them with Recording.take).
SUBLAYERS = ("encoder_self", "encoder_ff", "decoder_self", "cross", "decoder_ff")
WALK_PROBES: dict[str, str] = {
    **{f"{side}_{part}": f"{side} {title}" for side in (ENCODER, DECODER) for part, title in (
        ("embedding_row", "embedding rows of the input ids, (B, T, D), before any scaling"),
        ("embedding_scaled", "embedding rows times the embedding scale, (B, T, D)"),
        ("positions", "positional encoding of each position, (B, T, D)"),
        ("input", "scaled embedding + positional encoding, the first layer's input, (B, T, D)"))},
    **{f"{sub}_{part}": f"{sub} {title}" for sub in SUBLAYERS for part, title in (
        ("norm", "LayerNorm output, (B, T, D): the sub-layer's input (pre-norm) or the block's output (post-norm)"),
        ("output", "the sub-layer's output before the residual add (W_O's or W_2's), (B, T, D)"),
        ("sum", "the residual add x + sub-layer(x), (B, T, D)"))},
    **{f"{kind}_{part}": f"{kind} {title}" for kind in ATTENTION_KINDS for part, title in (
        ("values", "each head's value vectors, (B, H, Tk, hs)"),
        ("scores", "q·k / sqrt(hs) before any mask, (B, H, Tq, Tk)"),
        ("masked_scores", "the scores with masked keys at the dtype's lowest value, (B, H, Tq, Tk)"),
        ("heads", "each head's weighted sum of values, (B, H, Tq, hs)"),
        ("concat", "the heads concatenated, before W_O, (B, Tq, D)"))},
    **{f"{side}_ff_hidden": f"{side} feed-forward hidden units after the activation, (B, T, F)"
       for side in (ENCODER, DECODER)},
    "encoder_final": "the encoder stack's final norm output (the identity without one), (B, S, D): the memory",
    "decoder_final": "the decoder stack's final norm output (the identity without one), (B, T, D)",
    "logits": "the output projection's logits, (B, T, V)",
}
TEACHER_FORCED_PROBES = NORM_PROBES + VECTOR_PROBES + tuple(WALK_PROBES)

# the recordings open in this context; each knows the ids of the modules it listens to
active_recordings: ContextVar[tuple] = ContextVar("active_recordings", default=())


def is_recorded(module) -> bool:
    """Whether an open recording in this context wants `module`'s output (cheap when none is open)."""
    recordings = active_recordings.get()
    return bool(recordings) and any(id(module) in r.module_ids for r in recordings)


def check_probe_names(names, allowed=tuple(PROBES)) -> tuple[str, ...]:
    names = tuple(names)
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise ValueError(f"unknown probes {unknown}; the model declares {list(allowed)}")
    return names
