"""Decoding with a per-step trace: greedy and sampling here, beam search in `beam.py`.

All strategies decode a batch of sentences at once with the key/value cache, drop sentences from
the batch as they finish, and return one `DecodedSentence` per input with ids, steps and (when asked
for) the attention computed while producing exactly that output.

Shapes: N rows still decoding, S source length, V vocabulary, L layers, H heads.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch

from .capture import capture_attention
from .model import Transformer, padding_mask
from .tokenizer import BOS_ID, EOS_ID

TRACE_TOPK = 10  # candidates recorded per step


@dataclass
class StepTrace:
    token_id: int
    prob: float  # probability of the chosen token under the distribution it was chosen from
    topk: list[tuple[int, float]]  # (token id, probability), most probable first
    hypotheses: list[tuple[list[int], float]] | None = None  # beam search: live (ids, score) after this step


@dataclass
class DecodedSentence:
    token_ids: list[int]  # without BOS, with EOS if it was produced
    steps: list[StepTrace]
    score: float  # sum of log-probabilities (beam: length-normalised)
    # numpy float32, or None without capture: (L, H, S, S), (L, H, T, T), (L, H, T, S)
    encoder_self: np.ndarray | None = None
    decoder_self: np.ndarray | None = None
    cross: np.ndarray | None = None


@dataclass
class SamplingSettings:
    temperature: float = 1.0
    top_k: int = 0  # 0: no top-k filter
    top_p: float = 1.0  # 1.0: no nucleus filter
    seed: int = 0


def length_limits(src_lengths: list[int], max_length: int | None, model_max_len: int) -> list[int]:
    """Most output tokens (EOS included) per sentence: the caller's cap, else 2 x source + 10."""
    return [min(model_max_len, max_length or 2 * n + 10) for n in src_lengths]


@dataclass
class AttentionLog:
    """Per-step attention recorded during incremental decoding, each entry (N, L, H, keys) on the CPU."""

    encoder_self: torch.Tensor | None = None  # (B, L, H, S, S)
    decoder_self: list[torch.Tensor] = field(default_factory=list)
    cross: list[torch.Tensor] = field(default_factory=list)

    def add_step(self, record) -> None:
        # the newest query's row: the only one with a cache, the last one when the prefix is re-run
        self.decoder_self.append(torch.stack(record.take("decoder_self"), dim=1)[:, :, :, -1].float().cpu())
        self.cross.append(torch.stack(record.take("cross"), dim=1)[:, :, :, -1].float().cpu())

    def sentence(self, sentence: int, src_length: int, rows_per_step: list[int], out: DecodedSentence) -> None:
        """Fills `out`'s attention from the rows this sentence's output occupied at each step."""
        steps = len(rows_per_step)
        out.encoder_self = self.encoder_self[sentence, :, :, :src_length, :src_length].numpy()
        layers, heads = out.encoder_self.shape[:2]
        decoder_self = np.zeros((layers, heads, steps, steps), dtype=np.float32)
        cross = np.zeros((layers, heads, steps, src_length), dtype=np.float32)
        for step, row in enumerate(rows_per_step):
            decoder_self[:, :, step, : step + 1] = self.decoder_self[step][row].numpy()
            cross[:, :, step] = self.cross[step][row, :, :, :src_length].numpy()
        out.decoder_self, out.cross = decoder_self, cross


class StepDecoder:
    """Next-token logits for a batch of growing prefixes, with the key/value cache or (use_cache=False,
    the reference the cache is measured against) by re-running the decoder over the whole prefix."""

    def __init__(self, model: Transformer, memory, src_mask, use_cache: bool = True):
        # with no padding in the batch the cross-attention needs no mask: skipping it saves work every step
        self.model, self.memory, self.use_cache = model, memory, use_cache
        self.src_mask = None if bool(src_mask.all()) else src_mask
        self.cache = model.new_cache() if use_cache else None
        self.prefix = torch.full((memory.size(0), 1), BOS_ID, dtype=torch.long, device=memory.device)

    def step(self) -> torch.Tensor:
        """(N, V) float32 logits of the next token; padding and BOS can never be produced."""
        if self.use_cache:
            logits = self.model.decode_step(self.memory, self.src_mask, self.prefix[:, -1], self.cache)
        else:
            logits = self.model.decode(self.memory, self.src_mask, self.prefix)[:, -1]
        logits = logits.float()
        logits[:, [self.model.config.pad_id, BOS_ID]] = float("-inf")
        return logits

    def select_rows(self, rows: list[int]) -> None:
        """Keeps batch rows `rows`, in that order (rows may repeat: beam search copies hypotheses)."""
        index = torch.tensor(rows, dtype=torch.long, device=self.memory.device)
        self.memory = self.memory.index_select(0, index)
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, index)
        self.prefix = self.prefix.index_select(0, index)
        if self.cache is not None:
            self.cache.reorder(index)

    def append(self, tokens: torch.Tensor) -> None:
        """Feeds one token per row (N,) as the newest decoder input."""
        self.prefix = torch.cat([self.prefix, tokens[:, None]], dim=1)


def encode_batch(model: Transformer, sources: list[list[int]], device):
    """Pads sources (each ending with EOS) into (B, S) and runs the encoder once."""
    longest = max(len(s) for s in sources)
    src = torch.full((len(sources), longest), model.config.pad_id, dtype=torch.long)
    for row, ids in enumerate(sources):
        src[row, : len(ids)] = torch.tensor(ids)
    src = src.to(device)
    src_mask = padding_mask(src, model.config.pad_id)
    return model.encode(src, src_mask), src_mask


def filtered_distribution(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """(N, V) logits -> probabilities after temperature, top-k and top-p (nucleus, Holtzman et al. 2020)."""
    logits = logits / settings.temperature
    if settings.top_k > 0:
        kth = logits.topk(min(settings.top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(dim=-1)
    if settings.top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # drop a token when the tokens before it already reach top_p (the first always stays)
        drop_sorted = (sorted_probs.cumsum(dim=-1) - sorted_probs) >= settings.top_p
        probs = probs.masked_fill(drop_sorted.scatter(-1, order, drop_sorted), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@torch.inference_mode()
def decode_single_path(model: Transformer, sources: list[list[int]], max_length: int | None = None,
                       sampling: SamplingSettings | None = None, capture: bool = False,
                       use_cache: bool = True) -> list[DecodedSentence]:
    """Greedy decoding (sampling=None) or ancestral sampling, one hypothesis per sentence."""
    device = model.device
    limits = length_limits([len(s) for s in sources], max_length, model.config.max_len)
    results = [DecodedSentence([], [], 0.0) for _ in sources]
    generators = None
    if sampling is not None:  # one generator per sentence: its output does not depend on the batch
        generators = [torch.Generator(device="cpu").manual_seed(sampling.seed) for _ in sources]
    log = AttentionLog() if capture else None
    rows_per_step: list[list[int]] = [[] for _ in sources]
    with capture_attention(model) if capture else contextlib.nullcontext() as record:
        memory, src_mask = encode_batch(model, sources, device)
        if capture:
            log.encoder_self = torch.stack(record.take("encoder_self"), dim=1).float().cpu()
        decoder = StepDecoder(model, memory, src_mask, use_cache)
        active = list(range(len(sources)))  # sentence of each row
        while active:
            logits = decoder.step()
            if capture:
                log.add_step(record)
            if sampling is None:
                probs = logits.softmax(dim=-1)
                chosen = probs.argmax(dim=-1)
            else:
                probs = filtered_distribution(logits, sampling)
                probs_cpu = probs.cpu()
                chosen = torch.stack([torch.multinomial(probs_cpu[row], 1, generator=generators[s])[0]
                                      for row, s in enumerate(active)]).to(device)
            top_probs, top_ids = probs.topk(min(TRACE_TOPK, probs.size(-1)), dim=-1)
            chosen_probs = probs.gather(1, chosen[:, None])[:, 0]
            chosen_l, chosen_p = chosen.tolist(), chosen_probs.tolist()
            top_ids_l, top_probs_l = top_ids.tolist(), top_probs.tolist()
            keep = []
            for row, sentence in enumerate(active):
                out = results[sentence]
                out.token_ids.append(chosen_l[row])
                out.score += float(np.log(max(chosen_p[row], 1e-30)))
                out.steps.append(StepTrace(chosen_l[row], chosen_p[row], list(zip(top_ids_l[row], top_probs_l[row]))))
                rows_per_step[sentence].append(row)
                if chosen_l[row] != EOS_ID and len(out.token_ids) < limits[sentence]:
                    keep.append(row)
            if len(keep) != len(active):
                decoder.select_rows(keep)
                chosen, active = chosen[keep], [active[row] for row in keep]
            decoder.append(chosen)
    if capture:
        for sentence, out in enumerate(results):
            log.sentence(sentence, len(sources[sentence]), rows_per_step[sentence], out)
    return results
