"""Ancestral sampling with temperature, top-k and top-p (nucleus, Holtzman et al. 2020) filters."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .registry import Strategy, register, setting
from .single_path import decode_single_path


@dataclass
class SamplingSettings:
    temperature: float = setting(1.0, 0.05, 5.0, "Temperature (sampling)", step=0.05,
                                 help="below 1 sharpens the distribution, above 1 flattens it")
    top_k: int = setting(0, 0, 1000, "Top-k (sampling, 0 = off)", step=1, help="keep only the k most probable tokens")
    top_p: float = setting(1.0, 0.05, 1.0, "Top-p (sampling)", step=0.05,
                           help="keep the most probable tokens whose probabilities add up to p")
    seed: int = setting(0, 0, 2**31 - 1, "Seed (sampling)", help="the same seed gives the same output")


def filtered_distribution(logits: torch.Tensor, settings: SamplingSettings) -> torch.Tensor:
    """(N, V) logits -> probabilities after temperature, top-k and top-p."""
    logits = logits / settings.temperature
    if settings.top_k > 0:
        kth = logits.topk(min(settings.top_k, logits.size(-1)), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = logits.softmax(dim=-1)
    return nucleus(probs, settings.top_p) if settings.top_p < 1.0 else probs


NUCLEUS_FIRST_K = 64  # the most probable tokens looked at first: a nucleus is rarely wider


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """(N, V) probabilities with a token dropped when the more probable tokens before it already reach top_p (the
    first always stays), renormalised. The kept tokens are a prefix of the descending order, so a row's best k are
    enough once its k-th is dropped; k grows 4x for the rows where it is not (sorting all V, as it once did, cost
    0.3 ms a step). Each row grows its own k, so a row's tokens are those it keeps alone: in a batch, one flat row
    once made every row sort the whole vocabulary (a batch of 25 sampled lines took 2.5 s, 1 s alone)."""
    vocab = probs.size(-1)
    keep = torch.zeros_like(probs, dtype=torch.bool)
    rows = torch.arange(probs.size(0), device=probs.device)  # the rows whose nucleus is not found yet
    k = min(NUCLEUS_FIRST_K, vocab)
    while rows.numel():
        top, order = probs[rows].topk(k, dim=-1)  # (n, k), descending
        before = top.cumsum(dim=-1) - top
        found = before[:, -1] >= top_p if k < vocab else torch.ones_like(rows, dtype=torch.bool)
        keep[rows[found]] = keep[rows[found]].scatter(-1, order[found], before[found] < top_p)
        rows, k = rows[~found], min(vocab, 4 * k)
    probs = probs.masked_fill(~keep, 0.0)
    return probs / probs.sum(dim=-1, keepdim=True)


def decode_sampling(
    model, sources, settings: SamplingSettings, max_length=None, probes=(), use_cache=True, prefixes=None
):
    # one generator per sentence: a sentence's output does not depend on the rest of its batch
    generators = [torch.Generator(device="cpu").manual_seed(settings.seed) for _ in sources]

    def draw(logits, sentences):
        probs = filtered_distribution(logits, settings)
        on_cpu = probs.cpu()
        chosen = torch.stack([torch.multinomial(on_cpu[row], 1, generator=generators[s])[0]
                              for row, s in enumerate(sentences)])
        return probs, chosen.to(probs.device)

    return decode_single_path(model, sources, draw, max_length, probes, use_cache, prefixes)


SAMPLING = register(Strategy("sample", "sampling", SamplingSettings, decode_sampling,
                             "draws each token from the model's distribution"))
