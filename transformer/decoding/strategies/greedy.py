"""Greedy decoding: the most probable next token at every step."""
from __future__ import annotations

from dataclasses import dataclass

from .registry import Strategy, register
from .single_path import decode_fused_greedy, decode_single_path


@dataclass
class GreedySettings:
    pass


def most_probable(logits, rows):
    probs = logits.softmax(dim=-1)
    return probs, probs.argmax(dim=-1)


def decode_greedy(model, sources, settings: GreedySettings, max_length=None, probes=(), use_cache=True, prefixes=None):
    if len(sources) == 1 and not probes and use_cache and not any(prefixes or []):  # the API's text-only request
        return [decode_fused_greedy(model, sources[0], most_probable, max_length)]
    return decode_single_path(model, sources, most_probable, max_length, probes, use_cache, prefixes)


GREEDY = register(Strategy("greedy", "greedy", GreedySettings, decode_greedy,
                           "the most probable token at every step"))
