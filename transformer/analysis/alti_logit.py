"""Why X and not Y, read through the layers: ALTI-Logit (Ferrando et al., 2023, "Explaining How Transformers Use
Context to Build Predictions", ACL) of the log-odds log p(X) - log p(Y) at one decoding step.

The log-odds is a difference of two logits, d · LN(x_t) + (b_X - b_Y) with d = w_X - w_Y (rows of the output
projection) and x_t the residual stream of step t after the last decoder layer. With the final LayerNorm's scale
1/σ_t held at its value for x_t, LN is linear in x_t, so every vector the residual stream is a sum of adds its
own share g(v) = d · γ ⊙ (v - mean(v)) / σ_t (an RMS norm, T5's: γ ⊙ v / rms_t, no β), and the shares add up to the
log-odds exactly. The stream of step t
is the sum of:
- the embedding of its decoder input (with its position): that input's;
- per decoder layer, what self-attention moved from each earlier position k (sum over heads of α f(x_k), as in
  ALTI+): shared among the inputs as ALTI+ says x_k is made of them, before that layer;
- per decoder layer, what cross-attention moved from each encoder output s: shared as the encoder's rollout says;
- per decoder layer, the feed-forward update of step t: shared as ALTI+ says step t's stream is made, there;
- the biases (output projections' biases, the final LayerNorm's β, the output bias): no input's, reported apart.
So each source piece and each decoder input gets a score in log-odds units; positive favours X, negative Y.

Approximations, as the view states them: the feed-forward updates and the layer norms inside the sub-layers are
shared by ALTI+'s proportions rather than traced exactly, as in the paper.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.model import Transformer
from .alti import block_terms, rollout


@dataclass
class LogitContrast:
    step: int  # 0-based output position whose choice is explained
    log_odds: float  # log p(chosen) - log p(foil) at that step
    source: np.ndarray  # (S,) share of the log-odds per source piece
    prefix: np.ndarray  # (step + 1,) per decoder input: <s>, then the output before the step
    biases: float  # the part no input carries; source.sum() + prefix.sum() + biases == log_odds


@torch.no_grad()
def alti_logit(model: Transformer, src_ids: list[int], tgt_ids: list[int], step: int, foil_id: int,
               heads_off=None) -> LogitContrast:
    """ALTI-Logit of log p(tgt_ids[step]) - log p(foil_id), teacher-forced on the output `tgt_ids`."""
    if not 0 <= step < len(tgt_ids):
        raise ValueError(f"step must be in [0, {len(tgt_ids) - 1}] for an output of {len(tgt_ids)} pieces, got {step}")
    if not 0 <= foil_id < model.config.tgt_vocab_size:
        raise ValueError(
            f"foil_id must be a target vocabulary id in [0, {model.config.tgt_vocab_size - 1}], got {foil_id}"
        )
    traced = rollout(model, src_ids, tgt_ids[: step + 1], heads_off)
    seen, source = traced.seen, len(src_ids)
    last = model.decoder_layers[-1].feed_forward_residual
    final = seen[last][1][step]  # (D,) the residual stream of the step after the last layer
    norm = model.decoder_norm
    # an RMS norm (T5) neither centres nor shifts: sigma is the root mean square, and there is no beta
    centred = model.config.norm_kind == "layer"
    gamma = norm.weight.double()
    beta = norm.bias.double() if centred else torch.zeros_like(gamma)
    sigma = torch.sqrt((final.var(unbiased=False) if centred else final.pow(2).mean()) + norm.eps)
    weight, bias = model.generator.weight.double(), model.generator.bias.double()
    direction = weight[tgt_ids[step]] - weight[foil_id]

    def share(vectors: torch.Tensor) -> torch.Tensor:
        """(..., D) -> (...): each vector's part of the log-odds, through the final norm held linear."""
        centre = vectors.mean(-1, keepdim=True) if centred else 0.0
        return ((vectors - centre) * gamma / sigma) @ direction

    scores = torch.zeros(source + step + 1, dtype=torch.float64, device=final.device)
    first = seen[model.decoder_layers[0].self_attention_residual][0][step]  # the step's embedding and position
    scores[source + step] += share(first)
    accounted = first.clone()
    for index, layer in enumerate(model.decoder_layers):
        moved = block_terms(traced.weights["decoder_self"][index, 0, :, step: step + 1].double(),
                            traced.vectors["decoder_self"][index])[0]  # (K, D)
        scores += share(moved) @ traced.before[index][:, : source + step + 1]
        accounted += moved.sum(0)
        moved = block_terms(traced.weights["cross"][index, 0, :, step: step + 1].double(),
                            traced.vectors["cross"][index])[0]  # (S, D)
        scores += share(moved) @ traced.from_source[:, : source + step + 1]
        accounted += moved.sum(0)
        x, y = seen[layer.feed_forward_residual]
        update = y[step] - x[step]
        scores += share(update) * traced.after[index][step, : source + step + 1]
        accounted += update
    log_odds = float(share(final) + beta @ direction + bias[tgt_ids[step]] - bias[foil_id])
    biases = float(share(final - accounted) + beta @ direction + bias[tgt_ids[step]] - bias[foil_id])
    scores = scores.cpu().numpy()
    return LogitContrast(step, log_odds, scores[:source], scores[source:], biases)


__all__ = ["LogitContrast", "alti_logit"]
