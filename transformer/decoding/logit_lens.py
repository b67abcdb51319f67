"""The logit lens for an encoder-decoder: what each decoder layer would predict if it were the last.

For every step and decoder layer, the model's own final norm and output projection are applied to that
layer's output (nostalgebraist 2020; here on the decoder of a translation model). The last layer's row is
exactly the model's next-token distribution; earlier rows show when the final choice first appears.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.model import Transformer
from .step_decoder import forbid_never_produced

LENS_TOPK = 5


@dataclass
class LogitLens:
    topk: list[list[list[tuple[str, float]]]]  # [layer][step]: the LENS_TOPK most probable (piece, probability)
    chosen_prob: np.ndarray  # (L, T): the probability each layer gives the token finally chosen at each step
    chosen_rank: np.ndarray  # (L, T): that token's rank in each layer's distribution, 1 = first


@torch.inference_mode()
def logit_lens(model: Transformer, decoder_hidden: np.ndarray, chosen_ids: list[int], piece) -> LogitLens:
    """decoder_hidden (L, T, D): each decoder layer's output at each step (the "decoder_hidden" probe)."""
    hidden = torch.from_numpy(decoder_hidden).to(model.device, model.generator.weight.dtype)
    logits = model.generator(model.decoder_norm(hidden)).float()  # (L, T, V)
    forbid_never_produced(logits, model.config)
    probs = logits.softmax(dim=-1)
    top_probs, top_ids = probs.topk(LENS_TOPK, dim=-1)
    chosen = torch.tensor(chosen_ids, device=probs.device)
    chosen_probs = probs.gather(-1, chosen[None, :, None].expand(probs.size(0), -1, 1))[..., 0]  # (L, T)
    ranks = (probs > chosen_probs[..., None]).sum(dim=-1) + 1
    top_ids_l, top_probs_l = top_ids.tolist(), top_probs.tolist()
    topk = [[[(piece(i), p) for i, p in zip(ids, ps)] for ids, ps in zip(layer_ids, layer_probs)]
            for layer_ids, layer_probs in zip(top_ids_l, top_probs_l)]
    return LogitLens(topk, chosen_probs.cpu().numpy(), ranks.cpu().numpy())
