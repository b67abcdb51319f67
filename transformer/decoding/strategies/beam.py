"""Beam search with a length penalty (Wu et al., 2016: lp(n) = ((5 + n) / 6) ** alpha), recording its tree.

Every sentence keeps `beam_size` live hypotheses as rows of one batch; a hypothesis that emits EOS
moves to the sentence's finished list, and a sentence stops once it has `beam_size` finished ones (or
reaches its length limit), leaving the batch. Each live row remembers which row it came from at every
step (`path`), so the winner's step trace and recorded probes are read from the rows that produced it.

Each step examines the 2k best candidates of a sentence; every one becomes a node of the search tree,
kept (extends a live hypothesis), finished (ends one) or pruned (examined and dropped).
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace

import torch

from ...core.capture import record
from ...core.model import Transformer
from ..decoded import FINISHED, KEPT, PRUNED, DecodedSentence, SearchNode, StepTrace
from ..probe_log import ProbeLog
from ..step_decoder import StepDecoder, encode_batch, length_limits
from .registry import Strategy, register, setting
from .single_path import TRACE_TOPK


@dataclass
class BeamSettings:
    beam_size: int = setting(4, 1, 8, "Beam size", step=1, help="hypotheses kept at every step")
    length_penalty: float = setting(0.6, 0.0, 2.0, "Length penalty α (beam)", step=0.1,
                                    help="GNMT length normalisation; 0 compares raw log-probabilities")


def length_penalty(length: int, alpha: float) -> float:
    return ((5 + length) / 6) ** alpha


@dataclass
class Hypothesis:
    token_ids: list[int]
    token_probs: list[float]
    path: list[int]  # the row this hypothesis occupied at each step
    nodes: list[int]  # its search-tree node at each step
    log_prob: float


def decode_beam(model, sources, settings: BeamSettings, max_length=None, probes=(), use_cache=True, prefixes=None):
    return beam_search(model, sources, settings.beam_size, settings.length_penalty, max_length, probes, use_cache,
                       prefixes)


@torch.inference_mode()
def beam_search(model: Transformer, sources: list[list[int]], beam_size: int = 4, alpha: float = 0.6, max_length=None,
                probes=(), use_cache: bool = True, prefixes: list[list[int]] | None = None) -> list[DecodedSentence]:
    """`prefixes`: per sentence, target ids forced at the first steps: while forcing, a sentence's beam holds
    that one hypothesis (with the model's own log-probabilities); the search widens from there."""
    device, k = model.device, beam_size
    prefixes = prefixes or [[] for _ in sources]
    limits = length_limits([len(s) for s in sources], max_length, model.config.max_len)
    # per sentence: its finished (normalised score, hypothesis) pairs, and its search tree's nodes
    finished, trees = [[] for _ in sources], [[] for _ in sources]
    # trace per step: top-k of every row's distribution (ids, probabilities), and each sentence's live hypotheses
    step_topk, step_live = [], []
    log = ProbeLog(probes) if probes else None
    with record(model, probes) if probes else contextlib.nullcontext() as recording:
        memory, src_mask = encode_batch(model, sources, device)
        if log:
            log.add_encoder(recording)
        decoder = StepDecoder(model, memory, src_mask, use_cache)
        decoder.select_rows([i for i in range(len(sources)) for _ in range(k)])  # k rows per sentence
        active = list(range(len(sources)))
        # only the first of a sentence's k identical start rows may expand, or the beam fills with copies
        live = [Hypothesis([], [], [], [], 0.0 if j == 0 else -math.inf) for _ in sources for j in range(k)]
        step = 0
        while active:
            log_probs = decoder.step().log_softmax(dim=-1)  # (N, V)
            if log:
                log.add_step(recording)
            vocab = log_probs.size(-1)
            top_log_probs, top_ids = log_probs.topk(min(TRACE_TOPK, vocab), dim=-1)  # (N, 10), each row's best
            step_topk.append((top_ids.tolist(), top_log_probs.exp().tolist()))
            live_log_probs = torch.tensor([h.log_prob for h in live], device=device)[:, None]
            cand_scores, cand_index = best_candidates(log_probs, top_log_probs, top_ids, live_log_probs,
                                                      [prefixes[s] for s in active], step, k)
            next_live, next_rows, next_tokens, next_active, live_now = [], [], [], [], {}
            for i, sentence in enumerate(active):
                tree = trees[sentence]
                candidates = [(score, i * k + index // vocab, index % vocab)  # (score, row, token)
                              for score, index in zip(cand_scores[i], cand_index[i])]
                chosen = expand(candidates, live, tree, finished[sentence], k, step, alpha, model.config.eos_id)
                live_now[sentence] = [(h.token_ids, h.log_prob) for _, h in chosen]
                out_of_room = step + 1 >= limits[sentence]
                if len(finished[sentence]) >= k or out_of_room or not chosen:
                    if out_of_room or not finished[sentence]:
                        for _, h in chosen:  # ended by the length limit: they compete as they are
                            tree[h.nodes[-1]].status = FINISHED
                            finished[sentence].append((h.log_prob / length_penalty(step + 1, alpha), h))
                    continue
                # padded with dead copies so every sentence keeps k rows
                chosen += [(chosen[0][0], replace(chosen[0][1], log_prob=-math.inf)) for _ in range(k - len(chosen))]
                next_active.append(sentence)
                next_rows += [row for row, _ in chosen]
                next_tokens += [h.token_ids[-1] for _, h in chosen]
                next_live += [h for _, h in chosen]
            step_live.append(live_now)
            if next_active:
                decoder.select_rows(next_rows)
                decoder.append(torch.tensor(next_tokens, dtype=torch.long, device=device))
            active, live, step = next_active, next_live, step + 1
    return [best_of(sentence, candidates, trees[sentence], step_topk, step_live, prefixes[sentence],
                    log.sentence if log else None, len(sources[sentence]))
            for sentence, candidates in enumerate(finished)]


def best_of(sentence: int, candidates: list, tree: list[SearchNode], step_topk: list, step_live: list,
            prefix: list[int], recorded, source_length: int) -> DecodedSentence:
    """A sentence's best finished hypothesis with its trace: each step's candidates and live hypotheses, its tree,
    and (`recorded`: ProbeLog.sentence) what the probes recorded along its rows."""
    score, best = max(candidates, key=lambda c: c[0])
    steps = []
    for t, (token, prob, row) in enumerate(zip(best.token_ids, best.token_probs, best.path)):
        top_ids, top_probs = step_topk[t][0][row], step_topk[t][1][row]
        steps.append(StepTrace(token, prob, list(zip(top_ids, top_probs)), step_live[t].get(sentence, []),
                               forced=t < len(prefix)))
    out = DecodedSentence(best.token_ids, steps, float(score), tree=tree, winner=best.nodes)
    if recorded:
        out.recorded = recorded(sentence, source_length, best.path)
    return out


def best_candidates(log_probs, top_log_probs, top_ids, live_log_probs, forced: list[list[int]], step: int,
                    k: int) -> tuple[list, list]:
    """Each active sentence's best 2k (score, index) candidates, the index numbering its k x V continuations; a
    sentence still forcing its prefix (`forced`) continues with the forced token only."""
    sentences, vocab = len(forced), log_probs.size(-1)
    if any(step < len(prefix) for prefix in forced) or 2 * k > top_ids.size(-1):
        log_probs = force_prefixes(log_probs, forced, step, k)
        cand_scores, cand_index = (live_log_probs + log_probs).view(sentences, k * vocab).topk(2 * k, dim=-1)
    else:
        # a row's score adds one number to all its log-probabilities, so a sentence's best 2k candidates are among
        # its rows' own best: the 2k of its k x 10 instead of its k x V (the same candidates; the order of exactly
        # equal scores is topk's either way)
        scores = (live_log_probs + top_log_probs).view(sentences, -1)  # (sentences, k * 10)
        cand_scores, picked = scores.topk(2 * k, dim=-1)
        rows_in_beam = picked // top_ids.size(-1)
        tokens = top_ids.view(sentences, -1).gather(1, picked)
        cand_index = rows_in_beam * vocab + tokens  # as the k x V view numbers them
    return cand_scores.tolist(), cand_index.tolist()


def expand(candidates: list[tuple[float, int, int]], live: list[Hypothesis], tree: list[SearchNode],
           finished: list, k: int, step: int, alpha: float, eos: int) -> list[tuple[int, Hypothesis]]:
    """One sentence's candidates (score, row, token), best first, into the search tree: an ending among the top k
    joins `finished`, the first k others are kept; returns the kept (row, hypothesis) pairs."""
    chosen = []
    for rank, (score, row, token) in enumerate(candidates):
        if score == -math.inf:
            break
        parent = live[row]
        node = SearchNode(len(tree), parent.nodes[-1] if parent.nodes else None, step, token,
                          score - parent.log_prob, score, score / length_penalty(step + 1, alpha), PRUNED)
        tree.append(node)
        hypothesis = Hypothesis(parent.token_ids + [token], parent.token_probs + [math.exp(node.log_prob)],
                                parent.path + [row], parent.nodes + [node.id], score)
        if token == eos:
            # as in fairseq, an ending counts only from the top k candidates (so k=1 is greedy)
            if rank < k and len(finished) < k:
                finished.append((node.normalized_score, hypothesis))
                node.status = FINISHED
        elif len(chosen) < k:
            chosen.append((row, hypothesis))
            node.status = KEPT
        if len(chosen) == k and len(finished) >= k:
            break
    return chosen


def force_prefixes(log_probs: torch.Tensor, prefixes: list[list[int]], step: int, k: int) -> torch.Tensor:
    """Leaves only the forced token possible in the rows of sentences still inside their prefix."""
    forcing = [(i, prefix[step]) for i, prefix in enumerate(prefixes) if step < len(prefix)]
    if not forcing:
        return log_probs
    forced = torch.full_like(log_probs, -math.inf)
    for i, token in forcing:
        rows = slice(i * k, (i + 1) * k)
        forced[rows, token] = log_probs[rows, token]
    keep = torch.ones(log_probs.size(0), dtype=torch.bool, device=log_probs.device)
    for i, _ in forcing:
        keep[i * k : (i + 1) * k] = False
    return torch.where(keep[:, None], log_probs, forced)


BEAM = register(Strategy("beam", "beam search", BeamSettings, decode_beam,
                         "keeps the best few hypotheses at every step"))
