"""What is behind one attention weight: for one head and one query position, the query vector q, each key vector
k_j, their elementwise product q ⊙ k_j (its sum is the score: which dimensions agree, which disagree), the scaled
scores q·k_j / sqrt(head size) before the softmax, and the weights after it (bertviz's neuron view, Vig 2019).

One teacher-forced pass over (source, the translation's own output) records each head's queries and keys at the asked
layer only (core/probes.py: `encoder_layers.2.self_attention.queries` and the like), with the translation's heads
switched off as it was made, so the weights here are the ones its trace recorded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..choices import checked_choice
from ..core.capture import record
from ..core.head_mask import heads_masked
from ..core.model import Transformer
from ..core.probes import ATTENTION_KINDS, at_layer
from ..decoding.trace import Translation
from .registry import Analysis, ModelAccess


@dataclass
class QueryKey:
    kind: str
    layer: int  # 0-based
    head: int  # 0-based
    query: int  # 0-based query position
    query_vector: np.ndarray  # (hs,)
    key_vectors: np.ndarray  # (K, hs): the keys this query may see (decoder self-attention: up to itself)
    products: np.ndarray  # (K, hs) q ⊙ k_j
    scores: np.ndarray  # (K,) q·k_j / sqrt(hs)
    weights: np.ndarray  # (K,) softmax of the scores


def query_key(model: Transformer, src_ids: list[int], tgt_ids: list[int], kind: str, layer: int, head: int,
              query: int, heads_off=None) -> QueryKey:
    """The query/key breakdown of `kind`'s head (layer, head), 0-based, at query position `query`: a source
    position for encoder_self, an output step (the position that predicted tgt_ids[query]) otherwise."""
    checked_choice("kind", kind, ATTENTION_KINDS)
    stack = model.config.stack_of(kind)
    if not (0 <= layer < stack.layers and 0 <= head < stack.heads):
        raise ValueError(f"layer and head must be in [0, {stack.layers - 1}] and [0, {stack.heads - 1}] for {kind}, "
                         f"got {layer} and {head}")
    queries = len(src_ids) if kind == "encoder_self" else len(tgt_ids)
    if not 0 <= query < queries:
        raise ValueError(f"query must be in [0, {queries - 1}] for {kind}, got {query}")
    src = torch.tensor([src_ids], device=model.device)
    tgt = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], device=model.device)
    names = [at_layer(f"{kind}.queries", layer), at_layer(f"{kind}.keys", layer)]
    with torch.no_grad(), heads_masked(model, heads_off), record(model, names) as recording:
        model.layers_pass(src, tgt)
    q = recording[names[0]][0, 0, head, query].double()  # (hs,)
    k = recording[names[1]][0, 0, head].double()  # (K, hs)
    if kind == "decoder_self":
        k = k[: query + 1]  # the causal mask: later positions are not seen
    products = q[None, :] * k
    scores = products.sum(-1) / math.sqrt(q.numel())
    return QueryKey(kind, layer, head, query, q.cpu().numpy(), k.cpu().numpy(), products.cpu().numpy(),
                    scores.cpu().numpy(), scores.softmax(-1).cpu().numpy())


def query_key_analysis(access: ModelAccess, translation: Translation, kind: str, layer: int, head: int,
                       query: int) -> QueryKey:
    """The query and key vectors behind one head's weights at one query position (all 0-based)."""
    return query_key(access.model, translation.src_ids, translation.tgt_ids, kind, layer, head, query)


ANALYSIS = Analysis("query_key", "Query and key vectors", QueryKey, query_key_analysis, cheap=False,
                    description="one head's query, keys, their products, scores and weights at one query")

__all__ = ["ANALYSIS", "QueryKey", "query_key", "query_key_analysis"]
