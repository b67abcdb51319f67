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

Many outputs at once (a batch the server decoded together): one teacher-forced pass over them padded to the longest
source and the longest output, and the rollout with a batch axis; one output alone is a batch of one. A padded key
has attention weight 0, so it moves nothing, and its contribution is masked to exactly 0 (as is a decoder input
after the query): each output's rows are its own, to float32 rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.head_mask import heads_masked
from ..core.model import Transformer, causal_mask
from ..core.probes import ATTENTION_KINDS
from ..decoding.trace import ALTI_PLUS, Translation
from .forced_pass import ENCODER_STATES, ForcedOutput, Pass, attention_lengths, batches, forced_output, recorded_pass
from .registry import Analysis, ModelAccess

# Shapes (forced_pass.py's): B outputs, S source positions, T decoder inputs (one per prediction), both padded to the
# batch's longest; L layers, H heads, Q queries, K keys, D d_model.


@dataclass
class Contributions:
    matrix: np.ndarray  # (T, S + T): each prediction's contributions from the source pieces, then the decoder inputs
    source_share: np.ndarray  # (T,) the part from the source
    layers: np.ndarray  # (L, T, S + T): the same after each decoder layer (the last one is `matrix`)
    norms: dict[str, np.ndarray]  # kind -> (L, H, keys) ‖f_h(x_j)‖ from the same pass (norms.py's reading)


def head_vectors(attention, x: torch.Tensor) -> torch.Tensor:
    """(..., H, K, D): each head's value vector of each key position of x (..., K, D), through its output columns."""
    d, heads, inner = x.size(-1), attention.n_heads, attention.inner  # inner: H x hs, d_model but in T5
    hs = inner // heads
    weight = attention.in_proj.weight[2 * inner:].to(x.dtype)  # the values' rows
    bias = attention.in_proj.bias[2 * inner:].to(x.dtype)
    values = torch.addmm(bias, x.reshape(-1, d), weight.T).view(*x.shape[:-1], heads, hs)  # (..., K, H, hs)
    columns = attention.out_proj.weight.to(x.dtype).view(d, heads, hs)  # (D, H, hs)
    return torch.einsum("...khs,dhs->...hkd", values, columns)


def alti_rows(y: torch.Tensor, terms: torch.Tensor, real: torch.Tensor | None = None) -> torch.Tensor:
    """y (..., Q, D) and terms (..., Q, K, D) -> (..., Q, K) ALTI contributions, each row summing to 1. `real` (..., Q
    or 1, K): False at a key the query does not read (padding, a later decoder input), whose contribution is then
    exactly 0, whatever its term."""
    # ||y||_1 - ||y - t||_1 summed feature by feature: each difference is of the size of t_d, where the difference of
    # the two norms, sums of D values of the size of y, would lose the digits float32 rounds off them
    contributions = (y.abs()[..., None, :] - (y[..., None, :] - terms).abs_()).sum(-1).clamp(min=0)  # (..., Q, K)
    if real is not None:
        contributions = contributions.masked_fill(~real, 0)
    return contributions / contributions.sum(-1, keepdim=True).clamp(min=1e-12)


def block_terms(weights: torch.Tensor, vectors: torch.Tensor) -> torch.Tensor:
    """(..., Q, K, D): sum over heads of α_ij^h f_h(x_j), weights (..., H, Q, K), vectors (..., H, K, D) from
    `head_vectors`."""
    return torch.einsum("...hqk,...hkd->...qkd", weights, vectors)


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


@dataclass
class BatchRollout:
    """`Rollout` of B outputs padded into one batch: a batch axis first (after the layers in `passed.weights`), rows
    over [S source positions, T decoder inputs], padding included; `output(b)` is output b's own Rollout."""
    passed: Pass
    from_source: torch.Tensor  # (B, S, S + T)
    before: list[torch.Tensor]  # per decoder layer (B, T, S + T)
    after: list[torch.Tensor]  # per decoder layer (B, T, S + T)
    vectors: dict[str, list[torch.Tensor]]  # kind -> per layer (B, H, keys, D)

    def own_columns(self, rows, index: int):
        """Output `index`'s columns of `rows` (..., S + T): its source positions, then its decoder inputs."""
        source, target, padded = self.passed.sources[index], self.passed.targets[index], self.from_source.size(1)
        cat = np.concatenate if isinstance(rows, np.ndarray) else torch.cat
        return cat([rows[..., :source], rows[..., padded:padded + target]], -1)

    def output(self, index: int) -> Rollout:
        """Output `index`'s own Rollout, its padding cut off: what `rollout` gives it alone."""
        passed = self.passed
        source, target = passed.sources[index], passed.targets[index]
        sizes = {kind: attention_lengths(kind, source, target) for kind in ATTENTION_KINDS}  # (queries, keys)
        seen = {r: tuple(v[index, :source if r in passed.source_side else target] for v in pair)
                for r, pair in passed.seen.items()}
        seen["memory"] = passed.memory[index, :source]
        weights = {kind: values[:, index:index + 1, :, :sizes[kind][0], :sizes[kind][1]]
                   for kind, values in passed.weights.items()}
        vectors = {kind: [layer[index, :, :sizes[kind][1]] for layer in layers]
                   for kind, layers in self.vectors.items()}
        norms = {kind: torch.stack([v.norm(dim=-1) for v in layers]).float().cpu().numpy()
                 for kind, layers in vectors.items()}
        return Rollout(seen, weights, self.own_columns(self.from_source[index, :source], index),
                       [self.own_columns(rows[index, :target], index) for rows in self.before],
                       [self.own_columns(rows[index, :target], index) for rows in self.after], norms, vectors)

    def contributions(self) -> list[Contributions]:
        """Each output's ALTI+ contributions (`alti_plus`), its padding cut off."""
        layers = torch.stack(self.after).cpu().numpy()  # (L, B, T, S + T)
        norms = {kind: torch.stack([v.norm(dim=-1) for v in by_layer]).float().cpu().numpy()
                 for kind, by_layer in self.vectors.items()}  # (L, B, H, keys)
        results = []
        for index, (source, target) in enumerate(zip(self.passed.sources, self.passed.targets)):
            own = self.own_columns(layers[:, index, :target], index)  # (L, T, S + T), a copy
            results.append(Contributions(own[-1].copy(), own[-1, :, :source].sum(1), own, {
                kind: by_layer[:, index, :, :attention_lengths(kind, source, target)[1]].copy()
                for kind, by_layer in norms.items()}))
        return results


@torch.no_grad()
def rollout_batch(model: Transformer, outputs: list[ForcedOutput], heads_off=None,
                  dtype: torch.dtype = torch.float64) -> BatchRollout:
    """The pass and the layer-by-layer contributions of ALTI+ for every output of `outputs` at once (one padded
    pass; see `recorded_pass`), computed in `dtype`."""
    if model.config.norm != "pre":
        raise ValueError("alti_plus reads pre-norm layers (x + f(LN(x))); this model is post-norm")
    passed = recorded_pass(model, outputs, heads_off, dtype)
    seen, weights, device = passed.seen, passed.weights, model.device
    batch, source, target = len(outputs), max(passed.sources), max(passed.targets)
    real_sources = torch.arange(source, device=device) < torch.tensor(passed.sources, device=device)[:, None]  # (B, S)
    real_inputs = torch.arange(target, device=device) < torch.tensor(passed.targets, device=device)[:, None]  # (B, T)
    moved_by = {kind: [] for kind in ATTENTION_KINDS}  # per layer, kept for alti_logit

    def moved(kind, layer_attention, keys_input):
        """(B, H, K, D) what each head moves from each key; its norms are norm-based attention's (norms.py)."""
        moved_by[kind].append(head_vectors(layer_attention, keys_input))
        return moved_by[kind][-1]

    def mixing(kind, layer_attention, residual, layer_weights, real):
        """(B, Q, K) contributions of a self-attention sub-layer: the residual term added on the diagonal."""
        x, y = seen[residual]
        terms = block_terms(layer_weights.to(dtype), moved(kind, layer_attention, residual.norm(x.float()).to(dtype)))
        diagonal = torch.arange(x.size(1), device=device)
        terms[:, diagonal, diagonal] += x
        return alti_rows(y, terms, real)

    encoder = torch.eye(source, dtype=dtype, device=device).expand(batch, source, source)
    for index, layer in enumerate(model.encoder_layers):
        encoder = mixing("encoder_self", layer.self_attention, layer.attention_residual,
                         weights["encoder_self"][index], real_sources[:, None, :]) @ encoder
    rows = torch.cat([torch.zeros(batch, target, source, dtype=dtype, device=device),
                      torch.eye(target, dtype=dtype, device=device).expand(batch, target, target)], dim=2)
    from_source = torch.cat([encoder, torch.zeros(batch, source, target, dtype=dtype, device=device)], dim=2)
    real_prefix = real_inputs[:, None, :] & causal_mask(target, device)  # (B, T, T): the inputs each query reads
    real_cross = torch.cat([real_sources.new_ones(batch, 1), real_sources], dim=1)[:, None, :]  # the residual, then S
    before, after = [], []
    for index, layer in enumerate(model.decoder_layers):
        before.append(rows)
        rows = mixing("decoder_self", layer.self_attention, layer.self_attention_residual,
                      weights["decoder_self"][index], real_prefix) @ rows
        x, y = seen[layer.cross_attention_residual]
        terms = block_terms(weights["cross"][index].to(dtype), moved("cross", layer.cross_attention, passed.memory))
        shares = alti_rows(y, torch.cat([x[:, :, None, :], terms], dim=2), real_cross)  # (B, T, 1 + S)
        rows = shares[..., :1] * rows + shares[..., 1:] @ from_source
        after.append(rows)
    return BatchRollout(passed, from_source, before, after, moved_by)


def rollout(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off=None,
            dtype: torch.dtype = torch.float64, attention: dict | None = None, encoder: dict | None = None) -> Rollout:
    """The pass and the layer-by-layer contributions of ALTI+ for the output `tgt_ids` (no BOS), teacher-forced,
    computed in `dtype` (float64 by default: the analyses; the app's live view, which shows bytes, takes float32).
    `attention`: kind -> (L, H, queries, keys) weights of this very output, as decoding recorded them; the pass then
    records none of its own and runs the fused attention (the weights agree to float32 rounding). `encoder`: the
    encoder states decoding recorded (ENCODER_STATES), so that the pass runs the decoder alone."""
    return rollout_batch(model, [ForcedOutput(src_ids, tgt_ids, attention, encoder)], heads_off, dtype).output(0)


def alti_plus(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off=None,
              dtype: torch.dtype = torch.float64, attention: dict | None = None,
              encoder: dict | None = None) -> Contributions:
    """ALTI+ contributions of every prediction of the output `tgt_ids` (no BOS), teacher-forced (`attention` and
    `encoder`: see `rollout`)."""
    [result] = rollout_batch(model, [ForcedOutput(src_ids, tgt_ids, attention, encoder)], heads_off,
                             dtype).contributions()
    return result


def contributions_batch(model: Transformer, translations: list[Translation], dtype: torch.dtype = torch.float64
                        ) -> list[Contributions | None]:
    """`contributions` of each translation, from as few padded passes as `batches` allows (one for a batch of short
    sentences), with the heads switched off that the running context switched off; None for each, for a post-norm
    model."""
    if model.config.norm != "pre":
        return [None] * len(translations)
    outputs = [forced_output(translation) for translation in translations]
    results = [None] * len(outputs)
    for group in batches(outputs, model.config.d_model):
        traced = rollout_batch(model, [outputs[index] for index in group], None, dtype)
        for index, result in zip(group, traced.contributions()):
            results[index] = result
    return results


def contributions(model: Transformer, translation: Translation, dtype: torch.dtype = torch.float64
                  ) -> Contributions | None:
    """ALTI+ of `translation`'s own output in `dtype`, reading the weights and the encoder states decoding recorded
    where it recorded them, with the heads switched off that the running context switched off; None for a post-norm
    model."""
    return contributions_batch(model, [translation], dtype)[0]


def add_contributions(model: Transformer, translation: Translation, dtype: torch.dtype = torch.float64
                      ) -> Translation:
    """Fills `translation.contributions` and, from the same pass, `translation.norms` (a pre-norm model's; a
    post-norm one gets no contributions and keeps its norms as they were), with its heads off, in `dtype`."""
    with heads_masked(model, translation.settings.get("heads_off") or None):
        translation.contributions = contributions(model, translation, dtype)
    if translation.contributions is not None:
        translation.norms = translation.contributions.norms
    return translation


# float32: the page draws them as bytes, and it takes less time than float64
def alti_analysis(access: ModelAccess, translation: Translation) -> Contributions | None:
    return contributions(access.model, translation, torch.float32)


def alti_analysis_batch(access: ModelAccess, translations: list[Translation]) -> list[Contributions | None]:
    return contributions_batch(access.model, translations, torch.float32)


ANALYSIS = Analysis(ALTI_PLUS, "ALTI+ contributions", Contributions, alti_analysis, records=ENCODER_STATES,
                    compute_batch=alti_analysis_batch,
                    description="each prediction's contributions from each source piece, then each decoder input")

__all__ = ["ANALYSIS", "ENCODER_STATES", "BatchRollout", "Contributions", "ForcedOutput", "Rollout",
           "add_contributions", "alti_plus", "contributions", "contributions_batch", "rollout", "rollout_batch"]
