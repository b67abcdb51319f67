"""Input x gradient (Shrikumar et al., 2016; Denil et al., 2014): how much each source piece's embedding
pushes the log-probability of each target piece.

For target position t and source position s,

    score[t, s] = < d log p(tgt_ids[t] | source, tgt_ids[:t]) / d e_s , e_s >    (summed over d_model)

where e_s is the source token embedding after the sqrt(d_model) scaling and before positions are added.
It is the first-order change of the log-probability when e_s is scaled by (1 + epsilon), divided by
epsilon: positive scores raise the chosen piece's probability, negative ones lower it.

The model runs teacher-forced over the given output with gradients on (one forward pass, one backward
pass per target position). Heads switched off with `core.head_mask.heads_masked` around the call stay off.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.model import Transformer, padding_mask
from ..decoding.trace import Translation
from .registry import Analysis, ModelAccess


@dataclass
class Attribution:
    scores: np.ndarray  # (T, S) input x gradient of log p(target t) with respect to source embedding s
    log_probs: np.ndarray  # (T,) log p(tgt_ids[t] | source, prefix), teacher-forced
    rows: list[str] | None = None  # target pieces
    cols: list[str] | None = None  # source pieces


def input_x_gradient(model: Transformer, src_ids: list[int], tgt_ids: list[int]) -> Attribution:
    """(T, S) input x gradient scores of the output `tgt_ids` (no BOS) given the source `src_ids`."""
    if model.training:
        raise ValueError("input_x_gradient needs the model in eval mode (model.eval()): dropout would make it random")
    if not tgt_ids:
        return Attribution(np.zeros((0, len(src_ids))), np.zeros(0))
    device = model.device
    # decoding runs under inference_mode; a caller may be in it (or in no_grad), so switch both off here, and
    # make every tensor inside: one made in inference mode cannot be saved for backward
    with torch.inference_mode(False), torch.enable_grad():
        src = torch.tensor([src_ids], dtype=torch.long, device=device)
        tgt_in = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], dtype=torch.long, device=device)
        targets = torch.tensor(tgt_ids, dtype=torch.long, device=device)
        embeddings = model.src_embed(src).detach().requires_grad_(True)  # (1, S, D)

        def use_leaf(module, inputs, output):
            # replace the source embedding (and only it: with shared embeddings the target goes through the
            # same module) by the leaf we differentiate with respect to
            return embeddings if inputs[0] is src else output

        handle = model.src_embed.register_forward_hook(use_leaf)
        try:
            src_mask = padding_mask(src, model.config.pad_id)
            logits = model.decode(model.encode(src, src_mask), src_mask, tgt_in)[0]  # (T, V)
        finally:
            handle.remove()
        log_probs = logits.log_softmax(-1).gather(1, targets[:, None])[:, 0]  # (T,)
        scores = []
        for t in range(len(tgt_ids)):
            (gradient,) = torch.autograd.grad(log_probs[t], embeddings, retain_graph=t < len(tgt_ids) - 1)
            scores.append((gradient * embeddings).sum(-1)[0])  # (S,)
    return Attribution(torch.stack(scores).detach().cpu().double().numpy(),
                       log_probs.detach().cpu().double().numpy())


def attribute(model: Transformer, translation: Translation) -> Attribution:
    """Input x gradient of a translation's own output, labelled with its pieces."""
    result = input_x_gradient(model, translation.src_ids, translation.tgt_ids)
    result.rows, result.cols = list(translation.tgt_tokens), list(translation.src_tokens)
    return result


def attribution_analysis(access: ModelAccess, translation: Translation) -> Attribution:
    return attribute(access.model, translation)


ANALYSIS = Analysis("attribution", "Input × gradient", Attribution, attribution_analysis, cheap=False,
                    description="each source piece's push on each output piece's log-probability")

__all__ = ["ANALYSIS", "Attribution", "attribute", "input_x_gradient"]
