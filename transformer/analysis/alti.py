"""Source and target-prefix contributions to every prediction: ALTI+ (Ferrando et al., 2022, "Towards Opening the
Black Box of Neural Machine Translation: Source and Target Contributions to the Model", EMNLP), built on ALTI
(Ferrando et al., 2022, "Measuring the Mixing of Contextual Information in the Transformer").

Each attention sub-layer writes y_i = x_i + sum_j T_i(x_j) + b_o into the residual stream, where
T_i(x_j) = sum_h α_ij^h f_h(x_j) is what the heads move from position j (f_h: the head's value vector through its
columns of the output projection, of the normalised x_j in these pre-norm layers) and x_i itself is carried by
the residual. ALTI measures each term by how close it is to the result, in the L1 norm:

    c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1),  the residual term counted at j = i,

and normalises each row to sum to 1. Layers compose by matrix products (rollout), the feed-forward blocks and
layer norms being read as position-wise, as in the papers. For the decoder ALTI+ keeps, for every position, one row
over [source pieces, decoder inputs]: self-attention mixes the rows of the positions it reads; cross-attention
splits a position between its residual (its row so far) and the encoder outputs (their rows of the encoder's
own rollout over the source). The result's row t says how much of the prediction at step t came from each source
piece and each decoder input (<s>, then the output before it); its source part summed is the source share.

Approximations, as stated in the view: the output bias b_o is left out of the terms (it belongs to no token), and
the layer norms inside the sub-layers count as part of f (pre-norm: ||x_i + ...|| is not renormalised).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.capture import record
from ..core.head_mask import heads_masked, heads_masked_now
from ..core.model import Transformer, padding_mask
from ..core.probes import ATTENTION_KINDS
from ..decoding.trace import ALTI_PLUS, Translation
from .registry import Analysis, ModelAccess


@dataclass
class Contributions:
    matrix: np.ndarray  # (T, S + T): each prediction's contributions from the source pieces, then the decoder inputs
    source_share: np.ndarray  # (T,) the part from the source
    layers: np.ndarray  # (L, T, S + T): the same after each decoder layer (the last one is `matrix`)
    norms: dict[str, np.ndarray]  # kind -> (L, H, keys) ‖f_h(x_j)‖ from the same pass (norms.py's reading)


def head_vectors(attention, x: torch.Tensor) -> torch.Tensor:
    """(H, K, D): each head's value vector of each key position of x (K, D), through its output columns."""
    d, heads = x.size(-1), attention.n_heads
    hs = d // heads
    weight, bias = attention.in_proj.weight[2 * d:].to(x.dtype), attention.in_proj.bias[2 * d:].to(x.dtype)  # values'
    values = torch.addmm(bias, x, weight.T).view(-1, heads, hs)  # (K, H, hs)
    columns = attention.out_proj.weight.to(x.dtype).view(d, heads, hs)  # (D, H, hs)
    return torch.einsum("khs,dhs->hkd", values, columns)


def alti_rows(y: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
    """y (Q, D) and terms (Q, K, D) -> (Q, K) ALTI contributions, each row summing to 1."""
    distances = (y[:, None, :] - terms).abs().sum(-1)  # (Q, K)
    contributions = (y.abs().sum(-1, keepdim=True) - distances).clamp(min=0)
    return contributions / contributions.sum(-1, keepdim=True).clamp(min=1e-12)


def block_terms(weights: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """(Q, K, D): sum over heads of α_ij^h f_h(x_j), weights (H, Q, K), vectors (H, K, D) from `head_vectors`."""
    return torch.einsum("hqk,hkd->qkd", weights, vectors)


@dataclass
class Rollout:
    """One teacher-forced pass read the ALTI+ way, for alti_plus and the readings built on it (alti_logit.py).
    Rows are over [source pieces, decoder inputs] (S + T columns); layers count from 0."""
    seen: dict  # residual module -> (its input x, its output y) for position 0.. of the one sentence, in `dtype`
    weights: dict[str, torch.Tensor]  # kind -> (L, 1, H, Q, K) the pass's attention, switched-off heads at 0
    from_source: torch.Tensor  # (S, S + T) each encoder output's contributions (the encoder's rollout)
    before: list[torch.Tensor]  # per decoder layer (T, S + T): contributions to each position's input of the layer
    after: list[torch.Tensor]  # per decoder layer (T, S + T): the same after its cross-attention (= its output)
    norms: dict[str, np.ndarray]  # kind -> (L, H, keys) ‖f_h(x_j)‖
    vectors: dict[str, list[torch.Tensor]]  # kind -> per layer (H, keys, D) what each head moves from each key


# what decoding records for ALTI+ (the encoder's residual inputs and sums, and its layer outputs), so that its pass
# runs the decoder alone over the encoder states decoding computed
ENCODER_STATES = ("encoder_residual_input", "encoder_residual_sum", "encoder_hidden")


@torch.no_grad()
def recorded_pass(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off, dtype: torch.dtype,
                  attention: dict | None, encoder: dict | None = None) -> tuple[dict, dict]:
    """One teacher-forced pass, as `rollout` reads it: each residual sub-layer's input and output (and the encoder's
    normalised output, "memory") in `dtype`, and each attention kind's weights (L, 1, H, Q, K), a switched-off head's
    set to 0 (it moves nothing). `encoder`: ENCODER_STATES -> (L, S, D) arrays of this very source, as decoding
    recorded them; the pass then runs the decoder alone over them."""
    src = torch.tensor([src_ids], device=model.device)
    tgt = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], device=model.device)
    encoder_residuals = [layer.attention_residual for layer in model.encoder_layers]
    residuals = ([] if encoder is not None else encoder_residuals) + [
        r for layer in model.decoder_layers
        for r in (layer.self_attention_residual, layer.cross_attention_residual, layer.feed_forward_residual)]
    names = [point.name for r in residuals for point in (r.input, r.sum)]
    names += [] if attention is not None else list(ATTENTION_KINDS)
    with heads_masked(model, heads_off), record(model, names + ["encoder_final"] * (encoder is None)) as rec:
        switched_off = heads_masked_now(model)  # `heads_off` and those an enclosing context switched off
        if encoder is None:
            model.layers_pass(src, tgt)
        else:
            states = {name: torch.as_tensor(values, device=model.device) for name, values in encoder.items()}
            memory = model.encoder_norm(states["encoder_hidden"][-1:])  # (1, S, D), as decoding normalised it
            model.decoder_layers_output(memory, padding_mask(src, model.config.pad_id), tgt)
    # residual module -> (its input x, its output y: pre-norm, the sum), and the encoder's normalised output
    seen = {r: (rec[r.input.name][0, 0].to(dtype), rec[r.sum.name][0, 0].to(dtype)) for r in residuals}
    if encoder is None:
        seen["memory"] = rec["encoder_final"][0, 0].to(dtype)
    else:
        seen["memory"] = memory[0].to(dtype)
        seen |= {r: (states["encoder_residual_input"][index].to(dtype), states["encoder_residual_sum"][index].to(dtype))
                 for index, r in enumerate(encoder_residuals)}
    weights = {kind: torch.tensor(attention[kind])[:, None] if attention is not None else rec[kind]
               for kind in ("encoder_self", "decoder_self", "cross")}  # (L, 1, H, Q, K), copies: zeroed below
    for kind, layer, head in switched_off:  # a switched-off head's weights are recorded, but it moves nothing
        weights[kind][layer, :, head] = 0
    return seen, weights


@torch.no_grad()
def rollout(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off=None,
            dtype: torch.dtype = torch.float64, attention: dict | None = None, encoder: dict | None = None) -> Rollout:
    """The pass and the layer-by-layer contributions of ALTI+ for the output `tgt_ids` (no BOS), teacher-forced,
    computed in `dtype` (float64 by default: the analyses; the app's live view, which shows bytes, takes float32).
    `attention`: kind -> (L, H, queries, keys) weights of this very output, as decoding recorded them; the pass then
    records none of its own and runs the fused attention (the weights agree to float32 rounding). `encoder`: the
    encoder states decoding recorded (ENCODER_STATES), so that the pass runs the decoder alone."""
    if model.config.norm != "pre":
        raise ValueError("alti_plus reads pre-norm layers (x + f(LN(x))); this model is post-norm")
    seen, weights = recorded_pass(model, src_ids, tgt_ids, heads_off, dtype, attention, encoder)
    source, target = len(src_ids), len(tgt_ids)
    moved_by = {kind: [] for kind in ("encoder_self", "decoder_self", "cross")}  # per layer, kept for alti_logit

    def moved(kind, layer_attention, keys_input):
        """(H, K, D) what each head moves from each key; its norms are norm-based attention's (norms.py)."""
        moved_by[kind].append(head_vectors(layer_attention, keys_input))
        return moved_by[kind][-1]

    def mixing(kind, layer_attention, residual, weights):
        """(Q, K) contributions of a self-attention sub-layer: the residual term added on the diagonal."""
        x, y = seen[residual]
        terms = block_terms(weights.to(dtype), moved(kind, layer_attention, residual.norm(x.float()).to(dtype)))
        terms[torch.arange(len(x)), torch.arange(len(x))] += x
        return alti_rows(y, terms)

    encoder = torch.eye(source, dtype=dtype, device=model.device)
    for index, layer in enumerate(model.encoder_layers):
        encoder = mixing("encoder_self", layer.self_attention, layer.attention_residual,
                         weights["encoder_self"][index, 0]) @ encoder
    rows = torch.cat([torch.zeros(target, source, dtype=dtype, device=model.device),
                      torch.eye(target, dtype=dtype, device=model.device)], dim=1)  # (T, S + T)
    from_source = torch.cat([encoder, torch.zeros(source, target, dtype=dtype, device=model.device)], dim=1)
    before, after = [], []
    for index, layer in enumerate(model.decoder_layers):
        before.append(rows)
        rows = mixing("decoder_self", layer.self_attention, layer.self_attention_residual,
                      weights["decoder_self"][index, 0]) @ rows
        x, y = seen[layer.cross_attention_residual]
        terms = block_terms(weights["cross"][index, 0].to(dtype), moved("cross", layer.cross_attention, seen["memory"]))
        shares = alti_rows(y, torch.cat([x[:, None, :], terms], dim=1))  # (T, 1 + S): the residual, then each source
        rows = shares[:, :1] * rows + shares[:, 1:] @ from_source
        after.append(rows)
    norms = {kind: torch.stack([v.norm(dim=-1) for v in vectors]).float().cpu().numpy()
             for kind, vectors in moved_by.items()}
    return Rollout(seen, weights, from_source, before, after, norms, moved_by)


def alti_plus(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off=None,
              dtype: torch.dtype = torch.float64, attention: dict | None = None,
              encoder: dict | None = None) -> Contributions:
    """ALTI+ contributions of every prediction of the output `tgt_ids` (no BOS), teacher-forced (`attention` and
    `encoder`: see `rollout`)."""
    traced = rollout(model, src_ids, tgt_ids, heads_off, dtype, attention, encoder)
    matrix = traced.after[-1].cpu().numpy()
    return Contributions(matrix, matrix[:, :len(src_ids)].sum(1), torch.stack(traced.after).cpu().numpy(),
                         traced.norms)


def contributions(model: Transformer, translation: Translation, dtype: torch.dtype = torch.float64
                  ) -> Contributions | None:
    """ALTI+ of `translation`'s own output in `dtype`, reading the weights and the encoder states decoding recorded
    where it recorded them, with the heads switched off that the running context switched off; None for a post-norm
    model."""
    if model.config.norm != "pre":
        return None
    recorded = translation.recorded
    attention = ({kind: recorded[kind].values for kind in ATTENTION_KINDS}
                 if all(kind in recorded for kind in ATTENTION_KINDS) else None)
    encoder = ({name: recorded[name].values for name in ENCODER_STATES}
               if all(name in recorded for name in ENCODER_STATES) else None)
    return alti_plus(model, translation.src_ids, translation.tgt_ids, None, dtype, attention, encoder)


def add_contributions(model: Transformer, translation: Translation, dtype: torch.dtype = torch.float64
                      ) -> Translation:
    """Fills `translation.contributions` and, from the same pass, `translation.norms` (a pre-norm model's; a
    post-norm one gets no contributions and keeps its norms as they were), with its heads off, in `dtype`."""
    with heads_masked(model, translation.settings.get("heads_off") or None):
        translation.contributions = contributions(model, translation, dtype)
    if translation.contributions is not None:
        translation.norms = translation.contributions.norms
    return translation


def alti_analysis(access: ModelAccess, translation: Translation) -> Contributions | None:
    # float32: the page draws them as bytes, and it takes less time than float64
    return contributions(access.model, translation, torch.float32)


ANALYSIS = Analysis(ALTI_PLUS, "ALTI+ contributions", Contributions, alti_analysis, records=ENCODER_STATES,
                    description="each prediction's contributions from each source piece, then each decoder input")

__all__ = ["ANALYSIS", "ENCODER_STATES", "Contributions", "Rollout", "add_contributions", "alti_plus", "contributions",
           "rollout"]
