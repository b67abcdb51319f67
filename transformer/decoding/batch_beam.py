"""Beam search for many sentences at once, keeping nothing but the winners: for distilling a corpus.

The beam strategy (strategies/beam.py) records a search tree and a step trace for the explorer, in Python, per
candidate; on a GPU that bookkeeping, not the model, sets the pace of translating a whole training corpus. This
search makes the same choices as tensor operations over the batch: the same 2k candidates per sentence, an ending
counted only from the top k and while the sentence has fewer than k finished, the same GNMT length penalty, a
sentence done at k finished hypotheses or at its length limit (where its live hypotheses compete as they are), and the
winner the best normalised score, the earlier on a tie. It returns the winners' ids, equal to the beam strategy's
(tests compare them).

Shapes: A sentences still searching, k beam rows each (A * k rows), V vocabulary, T steps so far.
"""
from __future__ import annotations

import math

import torch

from ..core.model import Transformer
from .step_decoder import StepDecoder, encode_batch, length_limits


def length_penalties(steps: int, alpha: float) -> float:
    return ((5 + steps) / 6) ** alpha  # Wu et al., 2016, as strategies/beam.py


def first_k(mask: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row of a (A, C) mask: the positions of its first k true entries (padded with its first position), and
    whether each of those k is a true one."""
    order = torch.argsort((~mask).int(), dim=-1, stable=True)[:, :k]  # true entries first, in order
    return order, mask.gather(1, order)


@torch.inference_mode()
def beam_search_ids(model: Transformer, sources: list[list[int]], beam_size: int = 4, alpha: float = 0.6,
                    max_length: int | None = None) -> list[list[int]]:
    """The best hypothesis of each source (ids ending with EOS) as target ids, EOS included where it ended so."""
    device, k, eos = model.device, beam_size, model.config.eos_id
    limits = torch.tensor(length_limits([len(s) for s in sources], max_length, model.config.max_len), device=device)
    memory, src_mask = encode_batch(model, sources, device)
    decoder = StepDecoder(model, memory, src_mask)
    decoder.select_rows(torch.arange(len(sources)).repeat_interleave(k).tolist())
    active = torch.arange(len(sources), device=device)
    scores = torch.full((len(sources), k), -math.inf, device=device)
    scores[:, 0] = 0.0  # only the first of a sentence's k identical start rows may expand
    tokens = torch.zeros((len(sources) * k, 0), dtype=torch.long, device=device)  # (A * k, T)
    finished = torch.zeros(len(sources), dtype=torch.long, device=device)
    best_score = torch.full((len(sources),), -math.inf, dtype=torch.float64, device=device)
    best: list[list[int]] = [[] for _ in sources]
    rank = torch.arange(2 * k, device=device)
    step = 0
    while active.numel():
        log_probs = decoder.step().log_softmax(dim=-1)  # (A * k, V)
        vocab, count = log_probs.size(-1), active.numel()
        top_scores, top_index = (scores.reshape(-1, 1) + log_probs).view(count, k * vocab).topk(2 * k, dim=-1)
        from_row, token = top_index // vocab, top_index % vocab  # (A, 2k): the beam row extended, the token
        finite, is_eos = top_scores > -math.inf, token == eos
        penalty = length_penalties(step + 1, alpha)
        # endings among the top k, in rank order, while the sentence has fewer than k finished
        early_eos = is_eos & finite & (rank < k)
        before = torch.cumsum(early_eos.long(), dim=-1) - early_eos.long()
        finishing = early_eos & (finished[:, None] + before < k)
        parent = torch.arange(count, device=device)[:, None] * k + from_row  # (A, 2k): rows of `tokens`
        # the first finishing candidate of a sentence is its best this step (ranks are sorted by score)
        has_end, first_end = finishing.any(dim=-1), finishing.long().argmax(dim=-1)
        end_score = top_scores.gather(1, first_end[:, None])[:, 0].double() / penalty
        improved = has_end & (end_score > best_score[active])
        record(best, best_score, active, improved, end_score, tokens, parent.gather(1, first_end[:, None])[:, 0],
               torch.full_like(first_end, eos))
        finished = finished + finishing.sum(dim=-1)
        # the first k candidates that do not end extend the beam
        kept, is_kept = first_k(~is_eos & finite, k)
        kept_scores = torch.where(is_kept, top_scores.gather(1, kept), torch.full_like(top_scores[:, :k], -math.inf))
        kept_rows, kept_tokens = parent.gather(1, kept), token.gather(1, kept)
        out_of_room = step + 1 >= limits[active]
        none_kept = ~is_kept[:, 0]
        done = (finished >= k) | out_of_room | none_kept
        # a sentence ended by its length limit (or with nothing finished) lets its live hypotheses compete as they are
        as_they_are = done & (out_of_room | (finished == 0)) & ~none_kept
        live_score = kept_scores[:, 0].double() / penalty
        improved = as_they_are & (live_score > best_score[active])
        record(best, best_score, active, improved, live_score, tokens, kept_rows[:, 0], kept_tokens[:, 0])
        going = ~done
        rows = kept_rows[going].reshape(-1)
        tokens = torch.cat([tokens[rows], kept_tokens[going].reshape(-1, 1)], dim=1)
        scores, finished, active = kept_scores[going], finished[going], active[going]
        if active.numel():
            decoder.select_rows(rows.tolist())
            decoder.append(kept_tokens[going].reshape(-1))
        step += 1
    return best


def record(best: list[list[int]], best_score: torch.Tensor, active: torch.Tensor, improved: torch.Tensor,
           score: torch.Tensor, tokens: torch.Tensor, rows: torch.Tensor, last: torch.Tensor) -> None:
    """For each active sentence where `improved`: its new best score, and its hypothesis (the row of `tokens`
    extended by `last`) as ids."""
    if not bool(improved.any()):
        return
    sentences = active[improved]
    best_score[sentences] = score[improved]
    hypotheses = torch.cat([tokens[rows[improved]], last[improved][:, None]], dim=1)
    for sentence, ids in zip(sentences.tolist(), hypotheses.tolist()):
        best[sentence] = ids
