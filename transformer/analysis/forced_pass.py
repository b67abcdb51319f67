"""One teacher-forced pass over a batch of outputs, padded to the longest source and the longest output, recorded the
way ALTI+ (alti.py) reads it, and the padded ids the norms' pass (norms.py) runs on too. Where decoding recorded the
attention weights and the encoder states of an output (what the page records), the pass reuses them: it records no
weights of its own and runs the decoder alone.

Shapes: B outputs, S source positions, T decoder inputs (<s>, then all but the output's last piece), both padded to
the batch's longest; L layers, H heads, Q queries, K keys, D d_model.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.capture import record
from ..core.head_mask import heads_masked, heads_masked_now
from ..core.model import Transformer, padding_mask
from ..core.probes import ATTENTION_KINDS, ENCODER, PROBES, SOURCE
from ..decoding.trace import Translation


def attention_lengths(kind: str, source: int, target: int) -> tuple[int, int]:
    """(queries, keys) of attention `kind` for an output of `target` decoder inputs over `source` positions."""
    probe = PROBES[kind]
    return source if probe.stage == ENCODER else target, source if probe.keys == SOURCE else target


# what decoding records for ALTI+ (the encoder's residual inputs and sums, and its layer outputs), so that its pass
# runs the decoder alone over the encoder states decoding computed
ENCODER_STATES = ("encoder_residual_input", "encoder_residual_sum", "encoder_hidden")


@dataclass(frozen=True)
class ForcedOutput:
    """A source and the output (no BOS) a pass is teacher-forced on, with what decoding recorded of this very output,
    or None where the pass computes its own: `attention` kind -> (L, H, Q, K) weights, `encoder` ENCODER_STATES ->
    (L, S, D) states."""

    src_ids: list[int]
    tgt_ids: list[int]
    attention: dict | None = None
    encoder: dict | None = None

    @property
    def recorded(self) -> tuple[bool, bool]:
        """Whether decoding recorded its attention and its encoder states: the outputs of one pass must agree."""
        return self.attention is not None, self.encoder is not None


def forced_output(translation: Translation) -> ForcedOutput:
    """`translation`'s own output, with the weights and the encoder states decoding recorded where it recorded them."""
    recorded = translation.recorded
    attention = ({kind: recorded[kind].values for kind in ATTENTION_KINDS}
                 if all(kind in recorded for kind in ATTENTION_KINDS) else None)
    encoder = ({name: recorded[name].values for name in ENCODER_STATES}
               if all(name in recorded for name in ENCODER_STATES) else None)
    return ForcedOutput(translation.src_ids, translation.tgt_ids, attention, encoder)


def teacher_forced_ids(model: Transformer, outputs) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, S) sources and (B, T) decoder inputs (<s>, then each output but its last piece) of the (src_ids, tgt_ids)
    `outputs`, padded with pad_id, on the model's device."""
    start, pad = model.config.decoder_start_id, model.config.pad_id

    def padded(rows: list[list[int]]) -> torch.Tensor:
        ids = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long)
        for index, row in enumerate(rows):
            ids[index, :len(row)] = torch.tensor(row, dtype=torch.long)
        return ids.to(model.device)

    return padded([list(src) for src, _ in outputs]), padded([[start] + list(tgt[:-1]) for _, tgt in outputs])


def stacked(arrays: list[np.ndarray], device) -> torch.Tensor:
    """Per-output arrays (L, ...), zero-padded to the longest on every axis after the first and stacked on a new axis
    after it: (L, B, ...)."""
    shape = np.max([array.shape for array in arrays], axis=0)
    out = torch.zeros(shape[0], len(arrays), *shape[1:], dtype=torch.as_tensor(arrays[0]).dtype, device=device)
    for index, array in enumerate(arrays):
        out[(slice(None), index, *map(slice, array.shape[1:]))] = torch.as_tensor(array, device=device)
    return out


@dataclass
class Pass:
    """One teacher-forced pass over a batch of outputs, as the rollout reads it (see the shapes legend)."""
    seen: dict  # residual module -> (its input x, its output y), each (B, S or T, D) in the rollout's dtype
    memory: torch.Tensor  # (B, S, D) the encoder's normalised output
    weights: dict[str, torch.Tensor]  # kind -> (L, B, H, Q, K), switched-off heads and padding at 0
    sources: list[int]  # each output's source positions
    targets: list[int]  # each output's decoder inputs
    source_side: frozenset  # the residuals of `seen` over source positions (the encoder's)


@torch.no_grad()
def recorded_pass(model: Transformer, outputs: list[ForcedOutput], heads_off, dtype: torch.dtype) -> Pass:
    """One teacher-forced pass over `outputs`, padded into one batch, as `rollout_batch` reads it: each residual
    sub-layer's input and output (and the encoder's normalised output) in `dtype`, and each attention kind's weights, a
    switched-off head's set to 0 (it moves nothing). Where decoding recorded the weights the pass records none of its
    own and runs the fused attention (the weights agree to float32 rounding); where it recorded the encoder states
    the pass runs the decoder alone over them. The outputs must agree on what decoding recorded."""
    modes = {output.recorded for output in outputs}
    if len(modes) != 1:
        raise ValueError(f"outputs of one pass must all come with the recorded attention and encoder states or all "
                         f"without, got {sorted(modes)} (attention, encoder)")
    [(attention, encoder)] = modes
    src, tgt = teacher_forced_ids(model, [(output.src_ids, output.tgt_ids) for output in outputs])
    encoder_residuals = [layer.attention_residual for layer in model.encoder_layers]
    residuals = ([] if encoder else encoder_residuals) + [
        r for layer in model.decoder_layers
        for r in (layer.self_attention_residual, layer.cross_attention_residual, layer.feed_forward_residual)]
    names = [point.name for r in residuals for point in (r.input, r.sum)]
    names += [] if attention else list(ATTENTION_KINDS)
    with heads_masked(model, heads_off), record(model, names + ["encoder_final"] * (not encoder)) as rec:
        switched_off = heads_masked_now(model)  # `heads_off` and those an enclosing context switched off
        if not encoder:
            model.layers_pass(src, tgt)
        else:
            states = {name: stacked([output.encoder[name] for output in outputs], model.device)
                      for name in ENCODER_STATES}  # (L, B, S, D)
            memory = model.encoder_norm(states["encoder_hidden"][-1])  # (B, S, D), as decoding normalised it
            model.decoder_layers_output(memory, padding_mask(src, model.config.pad_id), tgt)
    # residual module -> (its input x, its output y: pre-norm, the sum)
    seen = {r: (rec[r.input.name][0].to(dtype), rec[r.sum.name][0].to(dtype)) for r in residuals}
    if encoder:
        seen |= {r: (states["encoder_residual_input"][index].to(dtype), states["encoder_residual_sum"][index].to(dtype))
                 for index, r in enumerate(encoder_residuals)}
    else:
        memory = rec["encoder_final"][0]
    weights = {kind: stacked([output.attention[kind] for output in outputs], model.device) if attention else rec[kind]
               for kind in ATTENTION_KINDS}  # (L, B, H, Q, K), copies: zeroed below
    for kind, layer, head in switched_off:  # a switched-off head's weights are recorded, but it moves nothing
        weights[kind][layer, :, head] = 0
    return Pass(seen, memory.to(dtype), weights, [len(output.src_ids) for output in outputs],
                [1 + len(output.tgt_ids[:-1]) for output in outputs], frozenset(encoder_residuals))


# how many numbers the largest (B, Q, K, D) terms tensor of one padded pass may hold (32 MiB in float32; the rollout
# keeps about three such at once): a batch of long outputs is split into several passes, an output is never split
BATCH_NUMBERS = 2 ** 23


def batches(outputs: list[ForcedOutput], width: int, budget: int = BATCH_NUMBERS) -> list[list[int]]:
    """The indices of `outputs` in the batches `contributions_batch` passes: outputs with the same recordings
    together, the longest first, each batch's largest terms tensor, B x max(S x S, T x T, T x (1 + S)) x `width`,
    within `budget` numbers wherever it holds more than one output."""
    def longest(index):
        return len(outputs[index].src_ids) + len(outputs[index].tgt_ids)

    groups, source, target = [], 0, 0
    for index in sorted(range(len(outputs)), key=lambda i: (outputs[i].recorded, -longest(i))):
        output = outputs[index]
        wider, longer = max(source, len(output.src_ids)), max(target, 1 + len(output.tgt_ids[:-1]))
        size = max(wider * wider, longer * longer, longer * (1 + wider)) * width
        if groups and outputs[groups[-1][0]].recorded == output.recorded and (len(groups[-1]) + 1) * size <= budget:
            groups[-1].append(index)
            source, target = wider, longer
        else:
            groups.append([index])
            source, target = len(output.src_ids), 1 + len(output.tgt_ids[:-1])
    return groups


__all__ = ["BATCH_NUMBERS", "ENCODER_STATES", "ForcedOutput", "Pass", "attention_lengths", "batches", "forced_output",
           "recorded_pass", "teacher_forced_ids"]
