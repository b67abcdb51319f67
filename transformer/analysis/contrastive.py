"""Why X and not Y: contrastive input x gradient (Yin and Neubig, 2022, "Interpreting Language Models with
Contrastive Explanations"). At one decoding step the model chose X over a candidate Y; the question is which
inputs pushed the log-odds

    log p(X | source, prefix) - log p(Y | source, prefix)

up or down. For every source piece s and every decoder input p (<s>, then the output before that step) the score is
< d log-odds / d e, e > for its token embedding e (after the sqrt(d_model) scaling, before positions are added):
the first-order change of the log-odds when that embedding is scaled by (1 + epsilon), divided by epsilon.
Positive scores favour X, negative ones Y. Decoder inputs after the step cannot affect it (the causal mask) and
are left out. A first-order reading: the scores need not add up to the log-odds.

The pass is teacher-forced on the translation's own output; heads switched off with `core.head_mask.heads_masked`
around the call stay off.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.head_ref import from_shown
from ..core.model import Transformer, padding_mask
from ..decoding.trace import Translation
from .alti_logit import LogitContrast, alti_logit
from .registry import Analysis, ModelAccess


@dataclass
class Contrast:
    step: int  # 0-based output position whose choice is explained
    chosen_id: int
    foil_id: int
    log_odds: float  # log p(chosen) - log p(foil) at that step
    source: np.ndarray  # (S,) score per source piece
    prefix: np.ndarray  # (step + 1,) score per decoder input: <s>, then the output before the step
    layers: LogitContrast | None = None  # the same log-odds read through the layers (ALTI-Logit), where filled


def contrastive_input_x_gradient(model: Transformer, src_ids: list[int], tgt_ids: list[int], step: int,
                                 foil_id: int) -> Contrast:
    """Why `tgt_ids[step]` and not `foil_id`, given the source and the output before `step`."""
    if model.training:
        raise ValueError(
            "contrastive attribution needs the model in eval mode (model.eval()): dropout would make it random"
        )
    if not 0 <= step < len(tgt_ids):
        raise ValueError(f"step must be in [0, {len(tgt_ids) - 1}] for an output of {len(tgt_ids)} pieces, got {step}")
    if not 0 <= foil_id < model.config.tgt_vocab_size:
        raise ValueError(
            f"foil_id must be a target vocabulary id in [0, {model.config.tgt_vocab_size - 1}], got {foil_id}"
        )
    chosen_id = tgt_ids[step]
    device = model.device
    # decoding runs under inference_mode; switch it and no_grad off here and make every tensor inside
    with torch.inference_mode(False), torch.enable_grad():
        src = torch.tensor([src_ids], dtype=torch.long, device=device)
        tgt_in = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:step])], dtype=torch.long, device=device)
        leaves = {}

        def use_leaf(module, inputs, output):
            # the source and the decoder inputs each through the (possibly shared) embedding: each becomes a leaf
            for name, tokens in (("source", src), ("prefix", tgt_in)):
                if inputs[0] is tokens:
                    leaves[name] = output.detach().requires_grad_(True)
                    return leaves[name]
            return output

        handles = [model.src_embed.register_forward_hook(use_leaf)]
        if model.tgt_embed is not model.src_embed:
            handles.append(model.tgt_embed.register_forward_hook(use_leaf))
        try:
            src_mask = padding_mask(src, model.config.pad_id)
            log_probs = model.decode(model.encode(src, src_mask), src_mask, tgt_in)[0, -1].log_softmax(-1)  # (V,)
        finally:
            for handle in handles:
                handle.remove()
        log_odds = log_probs[chosen_id] - log_probs[foil_id]
        source_grad, prefix_grad = torch.autograd.grad(log_odds, [leaves["source"], leaves["prefix"]])
        source = (source_grad * leaves["source"]).sum(-1)[0]
        prefix = (prefix_grad * leaves["prefix"]).sum(-1)[0]
    return Contrast(step, chosen_id, foil_id, float(log_odds.detach()), source.detach().cpu().double().numpy(),
                    prefix.detach().cpu().double().numpy())


def contrast_analysis(access: ModelAccess, translation: Translation, step: int, foil: str) -> Contrast:
    """Why `translation` chose its piece at 1-based `step` and not the piece `foil`: contrastive input x gradient
    and, for a pre-norm model, its ALTI-Logit through the layers."""
    model, tokenizer = access.model, access.tokenizer
    if not 1 <= step <= len(translation.tgt_ids):
        raise ValueError(f"step must be in [1, {len(translation.tgt_ids)}] for this translation, got {step}")
    foil_id = tokenizer.piece_to_id(foil)
    if tokenizer.id_to_piece(foil_id) != foil:
        raise ValueError(f"{foil!r} is not a piece of this model's vocabulary")
    contrast = contrastive_input_x_gradient(model, translation.src_ids, translation.tgt_ids, from_shown(step), foil_id)
    if model.config.norm == "pre":  # ALTI-Logit reads pre-norm layers, as ALTI+ does
        contrast.layers = alti_logit(model, translation.src_ids, translation.tgt_ids, from_shown(step), foil_id)
    return contrast


ANALYSIS = Analysis("contrast", "Why X and not Y", Contrast, contrast_analysis, cheap=False,
                    description="each input's push on log p(chosen) - log p(foil) at one step (Yin and Neubig, 2022)")

__all__ = ["ANALYSIS", "Contrast", "contrast_analysis", "contrastive_input_x_gradient"]
