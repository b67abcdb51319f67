"""One step of any hypothesis, looked at after the fact: what the model weighed next and where it looked.

Beam search keeps the step trace of its winner only; a click on another node of its tree asks for that
hypothesis's step here, by one teacher-forced pass over its prefix (the same numbers the search saw).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.capture import record
from ..core.head_mask import heads_masked
from .step_decoder import forbid_never_produced
from .strategies.single_path import TRACE_TOPK


@dataclass
class HypothesisStep:
    topk: list[tuple[str, float]]  # the next-token candidates after `prefix`, most probable first
    cross: np.ndarray  # (L, H, S) that step's cross-attention over the source


@torch.inference_mode()
def hypothesis_step(translator, src_ids: list[int], prefix_ids: list[int]) -> HypothesisStep:
    """The step that follows the target `prefix_ids` (ids after <s>) for the source `src_ids`."""
    model = translator.model
    src = torch.tensor([src_ids], device=model.device)
    decoder_input = torch.tensor([[model.config.decoder_start_id] + list(prefix_ids)], device=model.device)
    with record(model, ["cross"]) as recording:
        logits = model(src, decoder_input)[0, -1].float()
    forbid_never_produced(logits, model.config)
    top_probs, top_ids = logits.softmax(-1).topk(TRACE_TOPK)
    piece = translator.tokenizer.id_to_piece
    cross = recording["cross"][:, 0, :, -1, :].float().cpu().numpy()
    return HypothesisStep([(piece(i), p) for i, p in zip(top_ids.tolist(), top_probs.tolist())], cross)


@torch.inference_mode()
def output_log_prob(translator, src_ids: list[int], tgt_ids: list[int], heads_off=None) -> float:
    """log p(tgt_ids | src_ids), teacher-forced in one pass, with `heads_off` ((kind, layer, head), 0-based)
    switched off."""
    model = translator.model
    src = torch.tensor([src_ids], device=model.device)
    decoder_input = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], device=model.device)
    with heads_masked(model, list(heads_off or [])):
        logits = forbid_never_produced(model(src, decoder_input)[0].float(), model.config)
    targets = torch.tensor(tgt_ids, device=model.device)
    return float(logits.log_softmax(-1).gather(1, targets[:, None]).sum())
