"""One hypothesis per sentence, extended one token at a time: greedy decoding and sampling share this loop.

All sentences decode as one batch with the key/value cache, and leave the batch as they finish.
Shapes: N rows still decoding, V vocabulary.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np
import torch

from ...core.capture import record
from ...core.model import Transformer
from ..decoded import DecodedSentence, StepTrace
from ..probe_log import ProbeLog
from ..step_decoder import StepDecoder, encode_batch, length_limits

TRACE_TOPK = 10  # candidates recorded per step

# (logits (N, V), the sentence of each row) -> (distribution the token is drawn from (N, V), chosen ids (N,))
Chooser = Callable[[torch.Tensor, list[int]], tuple[torch.Tensor, torch.Tensor]]


@torch.inference_mode()
def decode_single_path(
    model: Transformer,
    sources: list[list[int]],
    choose: Chooser,
    max_length: int | None = None,
    probes=(),
    use_cache: bool = True,
    prefixes: list[list[int]] | None = None,
    encoded: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> list[DecodedSentence]:
    """`prefixes`: per sentence, target ids forced at the first steps (the model's probabilities for them are
    still recorded); decoding goes on from there with `choose`. `encoded`: the sources' (memory, src_mask) from
    `encode_batch` where the caller has already run the encoder (with no probes: theirs are recorded while it runs)."""
    if encoded is not None and probes:
        raise ValueError("encoded: the encoder's probes are recorded while it runs; pass no encoder output with probes")
    limits = length_limits([len(s) for s in sources], max_length, model.config.max_len)
    prefixes = prefixes or [[] for _ in sources]
    results = [DecodedSentence([], [], 0.0) for _ in sources]
    log = ProbeLog(probes) if probes else None
    rows_per_step: list[list[int]] = [[] for _ in sources]
    with record(model, probes) if probes else contextlib.nullcontext() as recording:
        memory, src_mask = encoded if encoded is not None else encode_batch(model, sources, model.device)
        if log:
            log.add_encoder(recording)
        decoder = StepDecoder(model, memory, src_mask, use_cache)
        active = list(range(len(sources)))  # sentence of each row
        while active:
            logits = decoder.step()
            if log:
                log.add_step(recording)
            probs, chosen = choose(logits, active)
            forced_rows = [row for row, s in enumerate(active) if len(results[s].token_ids) < len(prefixes[s])]
            if forced_rows:
                chosen = chosen.clone()
                for row in forced_rows:
                    sentence = active[row]
                    chosen[row] = prefixes[sentence][len(results[sentence].token_ids)]
            top_probs, top_ids = probs.topk(min(TRACE_TOPK, probs.size(-1)), dim=-1)
            chosen_probs = probs.gather(1, chosen[:, None])[:, 0]
            chosen_l, chosen_p = chosen.tolist(), chosen_probs.tolist()
            top_ids_l, top_probs_l = top_ids.tolist(), top_probs.tolist()
            keep = []
            for row, sentence in enumerate(active):
                out = results[sentence]
                extend(out, chosen_l[row], chosen_p[row], top_ids_l[row], top_probs_l[row], forced=row in forced_rows)
                rows_per_step[sentence].append(row)
                if chosen_l[row] != model.config.eos_id and len(out.token_ids) < limits[sentence]:
                    keep.append(row)
            if len(keep) != len(active):
                decoder.select_rows(keep)
                chosen, active = chosen[keep], [active[row] for row in keep]
            decoder.append(chosen)
    if log:
        for sentence, out in enumerate(results):
            out.recorded = log.sentence(sentence, len(sources[sentence]), rows_per_step[sentence])
    return results


@torch.inference_mode()
def decode_fused_greedy(model: Transformer, source: list[int], choose: Chooser,
                        max_length: int | None = None) -> DecodedSentence:
    """Greedy decoding of one sentence with nothing recorded and nothing forced, the whole loop in the compiled
    kernel (FusedStep.greedy): the same softmax, top-k and argmax as `decode_single_path` with greedy's chooser
    `choose`, so the same ids, probabilities and score, without a Python round per step (about 0.13 ms of a 0.6 ms
    step). Where the fused step does not run (core/fused_step.py's why_not_fused), or an open recording listens to
    the points it records (its loop records nothing), `decode_single_path` decodes with `choose` from the same
    encoder output: the encoder runs once either way."""
    [limit] = length_limits([len(source)], max_length, model.config.max_len)
    memory, src_mask = encode_batch(model, [source], model.device)
    decoder = StepDecoder(model, memory, src_mask)
    if decoder.fused is None or decoder.fused.records():
        [decoded] = decode_single_path(model, [source], choose, max_length, encoded=(memory, src_mask))
        return decoded
    start, eos = model.config.decoder_start_id, model.config.eos_id
    ids, probs, top_ids, top_probs = decoder.fused.greedy(start, decoder.never_produced, eos, limit, TRACE_TOPK)
    result = DecodedSentence([], [], 0.0)
    for step in zip(ids.tolist(), probs.tolist(), top_ids.tolist(), top_probs.tolist()):
        extend(result, *step, forced=False)
    return result


def extend(out: DecodedSentence, token: int, prob: float, candidates: list[int], candidate_probs: list[float],
           forced: bool) -> None:
    """One chosen token appended to a single-path hypothesis: its id, its log-probability added to the score, and
    the step's trace with its candidates."""
    out.token_ids.append(token)
    out.score += float(np.log(max(prob, 1e-30)))
    out.steps.append(StepTrace(token, prob, list(zip(candidates, candidate_probs)), forced=forced))
