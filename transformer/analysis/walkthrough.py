"""How the model computed one translation, operation by operation, on the sentence's own numbers: the walk-through.

One teacher-forced pass over (source, the translation's own output) records every intermediate the forward pass makes
(core/probes.WALK_PROBES, by the Tap modules of core/tap.py), with the translation's heads switched off as it was made.
`walkthrough` then reads them for one source token, one head and one decoding step into typed stages, in the order the
model runs them: text to ids; into the model; one encoder layer in full, then every layer compactly; the decoder at
the step; out of the model. Each stage holds named, labelled numbers; none is computed here that the model did not
compute, except what explains them (a vector's norm, the count of units above zero, which entries a mask removed).

Indices are 0-based here: `token` is a source position, `step` the decoding step (0: the first output piece, predicted
from <s>), `head` a head of every attention kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.capture import record
from ..core.head_mask import heads_masked
from ..core.model import Transformer
from ..core.probes import ATTENTION_KINDS, VECTOR_PROBES, WALK_PROBES
from ..decoding.step_decoder import forbid_never_produced
from .registry import Analysis, ModelAccess

TOP_CANDIDATES = 10
PER_LAYER = ("encoder_hidden", "decoder_hidden", *ATTENTION_KINDS, *VECTOR_PROBES)
ONCE_PER_PASS = ("encoder_embedding_row", "encoder_embedding_scaled", "encoder_positions", "encoder_input",
                 "decoder_embedding_row", "decoder_embedding_scaled", "decoder_positions", "decoder_input",
                 "encoder_final", "decoder_final", "logits")
MODULES = {"text": "transformer/tokenizer.py (Tokenizer.encode)",
           "embed": "transformer/core/model.py (TokenEmbedding, Transformer.embed)",
           "positions": "transformer/core/positional.py",
           "norm": "transformer/core/layers.py (Residual)",
           "projections": "transformer/core/attention.py (MultiHeadAttention.project_self, project_queries)",
           "attention": "transformer/core/attention.py (explicit_attention)",
           "mask": "transformer/core/model.py (padding_mask, causal_mask)",
           "heads": "transformer/core/attention.py (MultiHeadAttention.attend_to)",
           "residual": "transformer/core/layers.py (Residual)",
           "ff": "transformer/core/layers.py (FeedForward)",
           "layers": "transformer/core/layers.py (EncoderLayer, DecoderLayer)",
           "output": "transformer/core/model.py (Transformer.decode, generator)",
           "softmax": "transformer/decoding/step_decoder.py (forbid_never_produced) and torch.softmax",
           "choose": "transformer/decoding/strategies/"}


@dataclass
class Numbers:
    """One labelled quantity: `kind` says how to read `values`: "scalar", "vector" (features), "row" (one value per
    `cols` label), "matrix" (rows x cols), "tokens" (one entry per `cols` label, any JSON value)."""

    name: str
    label: str
    kind: str
    values: object  # float, np.ndarray or list
    rows: list[str] | None = None
    cols: list[str] | None = None
    note: str = ""


@dataclass
class Stage:
    key: str  # unique, e.g. "encoder.self.scores"
    block: str  # where it sits in the overview: text, input, encoder, cross, decoder, output
    title: str
    text: str  # one to three plain sentences
    formula: str
    module: str  # the package module it comes from
    numbers: list[Numbers] = field(default_factory=list)
    terms: tuple[str, ...] = ()  # glossary terms the stage uses


@dataclass
class Walkthrough:
    source: str
    text: str
    token: int
    step: int
    head: int
    architecture: dict  # norm placement, positions, tying, sizes: what the stages' order and text depend on
    src_tokens: list[str]
    decoder_inputs: list[str]
    tgt_tokens: list[str]
    stages: list[Stage]


def record_pass(model: Transformer, src_ids: list[int], tgt_ids: list[int], heads_off=None) -> dict[str, torch.Tensor]:
    """Every walk-through probe of one teacher-forced pass, batch axis removed: per-layer probes (L, ...), the others
    (...). The decoder's inputs are its start token (<s>) then tgt_ids[:-1], as decoding fed them."""
    src = torch.tensor([src_ids], device=model.device)
    tgt = torch.tensor([[model.config.decoder_start_id] + list(tgt_ids[:-1])], device=model.device)
    names = (*WALK_PROBES, *PER_LAYER)
    with torch.no_grad(), heads_masked(model, heads_off), record(model, names) as recording:
        model(src, tgt)
    out = {}
    for name in names:
        calls = recording.take(name)
        out[name] = calls[0][0].float().cpu() if name in ONCE_PER_PASS else torch.stack(calls)[:, 0].float().cpu()
    return out


def vector(name: str, label: str, values: torch.Tensor, note: str = "") -> Numbers:
    return Numbers(name, label, "vector", values.numpy(), note=note)


def norm_of(values: torch.Tensor) -> float:
    return float(values.double().norm())


def is_byte_piece(piece: str) -> bool:
    """SentencePiece's byte fallback: "<0xCE>" spells one UTF-8 byte of a character the vocabulary lacks."""
    return len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">")


def masked_as_inf(masked: torch.Tensor) -> np.ndarray:
    """Masked scores with the dtype's lowest value (what masked_fill wrote) as -inf, which is what it stands for."""
    out = masked.numpy().astype(np.float64)
    out[masked.numpy() <= np.finfo(np.float32).min] = -np.inf
    return out


class _Walk:
    """Builds the stages from one pass's recordings (`rec`)."""

    def __init__(self, model, translation, rec, token, step, head, start_piece: str):
        self.model, self.t, self.rec = model, translation, rec
        self.token, self.step, self.head = token, step, head
        config = model.config
        self.config = config
        self.pre = config.norm == "pre"
        self.hs = config.d_model // config.n_heads
        self.src = list(translation.src_tokens)
        self.inputs = [start_piece] + list(translation.tgt_tokens[:-1])  # what decoding fed the decoder
        self.stages: list[Stage] = []

    def add(self, *args, **kwargs) -> None:
        self.stages.append(Stage(*args, **kwargs))

    # ----- text to ids, into the model -----
    def text_to_ids(self, tokenizer) -> None:
        t = self.t
        unk = self.config.unk_id
        unknown = [p for p, i in zip(t.src_tokens, t.src_ids) if i == unk]
        spelled = [p for p in t.src_tokens if is_byte_piece(p)]
        self.add("text.pieces", "text", "Text to ids",
                 "The tokenizer cuts the sentence into pieces from its fixed vocabulary and looks up each piece's id. "
                 "“▁” marks a piece that starts a new word (it stands for the space before it); a piece without it "
                 "continues the word before. </s> closes the sentence." +
                 (f" {len(unknown)} piece(s) are not in the vocabulary and become <unk> (id {unk})." if unknown else
                  f" A piece the vocabulary lacks would become <unk> (id {unk}); this sentence has none.") +
                 (f" {len(spelled)} piece(s) like {spelled[0]} are single bytes: a character the vocabulary lacks is "
                  "spelled out in its UTF-8 bytes." if spelled else ""),
                 "sentence → pieces → ids", MODULES["text"],
                 [Numbers("pieces", "piece", "tokens", list(t.src_tokens), cols=list(t.src_tokens)),
                  Numbers("ids", "id", "tokens", [int(i) for i in t.src_ids], cols=list(t.src_tokens)),
                  Numbers("starts_word", "starts a word (▁)", "tokens", [p.startswith("▁") for p in t.src_tokens],
                          cols=list(t.src_tokens)),
                  Numbers("unknown", "unknown (<unk>)", "tokens", [int(i) == unk for i in t.src_ids],
                          cols=list(t.src_tokens)),
                  Numbers("byte", "a byte (<0x..>)", "tokens", [is_byte_piece(p) for p in t.src_tokens],
                          cols=list(t.src_tokens)),
                  Numbers("vocabulary", "pieces in the vocabulary", "scalar", int(tokenizer.vocab_size))],
                 ("piece", "▁", "id", "<unk>", "</s>"))

    def input_stages(self, side: str, position: int, token: str) -> None:
        rec, d = self.rec, self.config.d_model
        row = rec[f"{side}_embedding_row"][position]
        scaled = rec[f"{side}_embedding_scaled"][position]
        positions = rec[f"{side}_positions"][position]
        total = rec[f"{side}_input"][position]
        block = "input" if side == "encoder" else "decoder"
        where = f"“{token}” at position {position + 1}"
        biggest = int(row.abs().argmax())
        scale = float(scaled[biggest] / row[biggest]) if float(row[biggest]) else float("nan")
        tied = (" The source and target share one embedding matrix." if self.config.share_embeddings else "")
        rows = self.config.src_vocab_size if side == "encoder" else self.config.tgt_vocab_size
        self.add(f"{side}.embedding", block, "Embedding row",
                 f"The id of {where} picks one row of the embedding matrix ({rows} rows × {d} numbers): "
                 f"the token's learned vector.{tied}",
                 "e = E[id]", MODULES["embed"],
                 [vector("embedding_row", f"E[{token}]", row), Numbers("norm", "‖e‖", "scalar", norm_of(row))],
                 ("embedding", "d_model"))
        scaled_text = (f"The row is multiplied by {scale:.4g}"
                       + (f" = √d_model = √{d}" if abs(scale - d ** 0.5) < 1e-3 * d ** 0.5 else "") +
                       ": the embeddings were initialised small (about 1/√d_model), and the scaling brings them to "
                       "the size of the positional encoding, so the position does not drown the token.")
        if abs(scale - 1) < 1e-6:
            scaled_text = ("This checkpoint does not scale its embeddings (it was trained without the paper's "
                           "× √d_model): the row goes on as it is.")
        self.add(f"{side}.scaled", block, "Scaled embedding", scaled_text,
                 "x = e × √d_model", MODULES["embed"],
                 [vector("embedding_scaled", "e × scale", scaled), Numbers("scale", "scale", "scalar", scale),
                  Numbers("norm", "‖e × scale‖", "scalar", norm_of(scaled))], ("d_model",))
        halves = getattr(self.config, "sinusoidal_layout", "interleaved") == "halves"
        if self.config.pos_encoding == "sinusoidal":
            where = ("sines in the first half of the features and cosines in the second" if halves else
                     "sines in the even features and cosines in the odd ones")
            text = (f"Position {position} (counted from 0) gets a fixed vector: {where}, each frequency lower than "
                    "the one before, so every position has its own pattern and nearby positions have similar ones.")
            formula = ("PE[pos, i] = sin(pos / 10000^(2i/d)) for i < d/2, cos(…) after" if halves else
                       "PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d))")
        else:
            text = (f"Position {position} (counted from 0) gets its row of a learned table: this checkpoint learned "
                    "its positional vectors in training instead of using the paper's sines and cosines.")
            formula = "PE[pos] = P[pos] (a learned table)"
        self.add(f"{side}.positions", block, "Positional encoding", text, formula, MODULES["positions"],
                 [vector("positions", f"PE[{position}]", positions), Numbers("position", "position (from 0)",
                                                                             "scalar", position)],
                 ("positional encoding",))
        self.add(f"{side}.input", block, "Into the first layer",
                 "The scaled embedding and the positional encoding are added feature by feature: this sum is what the "
                 "first layer receives (dropout is off when translating).",
                 "x₀ = e × √d_model + PE[pos]", MODULES["embed"],
                 [vector("embedding_scaled", "e × scale", scaled), vector("positions", f"PE[{position}]", positions),
                  vector("input", "x₀", total), Numbers("norm", "‖x₀‖", "scalar", norm_of(total))],
                 ("residual stream",))

    # ----- one sub-layer in full -----
    def norm_stage(self, sub: str, block: str, position: int, before: torch.Tensor, title: str) -> None:
        normed = self.rec[f"{sub}_norm"][0, position]
        where = ("before the sub-layer (pre-norm: the sub-layer reads the normalised vector, the residual keeps the "
                 "raw one)" if self.pre else "after the residual add (post-norm, as in the original paper)")
        self.add(f"{block}.{sub}.norm", block, title,
                 f"Layer norm rescales the vector to mean 0 and variance 1 over its {self.config.d_model} features, "
                 f"then applies a learned gain and bias. This checkpoint normalises {where}.",
                 "LN(x) = γ ⊙ (x − mean(x)) / √(var(x) + ε) + β", MODULES["norm"],
                 [vector("in", "x", before), vector("out", "LN(x)", normed),
                  Numbers("norm_in", "‖x‖", "scalar", norm_of(before)), Numbers("norm_out", "‖LN(x)‖", "scalar",
                                                                                  norm_of(normed))],
                 ("layer norm", "pre-norm", "post-norm"))

    def attention_stages(self, kind: str, block: str, position: int, keys_shown: int) -> None:
        rec, h, hs = self.rec, self.head, self.hs
        layer = 0
        rows = self.src if kind == "encoder_self" else self.inputs
        cols = self.src if kind in ("encoder_self", "cross") else self.inputs
        cols = cols[:keys_shown]
        q = rec[f"{kind}_queries"][layer, h, position]
        k = rec[f"{kind}_keys"][layer, h, :keys_shown]
        v = rec[f"{kind}_values"][layer, h, :keys_shown]
        scores = rec[f"{kind}_scores"][layer, h]
        masked = rec[f"{kind}_masked_scores"][layer, h]
        weights = rec[kind][layer, h]
        head_out = rec[f"{kind}_heads"][layer, h, position]
        concat = rec[f"{kind}_concat"][layer, position]
        d = self.config.d_model
        name = {"encoder_self": "Encoder self-attention", "decoder_self": "Masked self-attention",
                "cross": "Cross-attention"}[kind]
        source = {"encoder_self": "every source piece's vector (after the norm, pre-norm; the layer input, post-norm)",
                  "decoder_self": "every decoder input so far", "cross": "the encoder's output (the memory)"}[kind]
        query = rows[position]
        # the key and value shown beside the query: its own (self-attention), or the source piece it weighs most
        j = position if kind != "cross" else int(weights[position].argmax())
        term = {"encoder_self": "encoder self-attention", "decoder_self": "masked self-attention",
                "cross": "cross-attention"}[kind]
        self.add(f"{block}.{kind}.qkv", block, f"{name}: query, key, value (head {h + 1})",
                 f"Three learned projections map the vector of “{query}” to a query, a key and a value for each of the "
                 f"{self.config.n_heads} heads ({hs} numbers each). The query asks, the keys of {source} answer, and "
                 "the values are what gets passed on.",
                 "q = x W_Q + b_Q,  k_j = x_j W_K + b_K,  v_j = x_j W_V + b_V", MODULES["projections"],
                 [vector("query", f"q of “{query}”", q), vector("key", f"k of “{cols[j]}”", k[j]),
                  vector("value", f"v of “{cols[j]}”", v[j]),
                  Numbers("projection_shape", "each projection per head", "tokens", [d, hs], cols=["d_model", "d_k"]),
                  Numbers("stacked_shape", "the stacked projection in_proj", "tokens", [3 * d, d],
                          cols=["outputs (q | k | v)", "inputs"])],
                 ("query", "key", "value", "head", term))
        if kind == "decoder_self":  # the causal mask is the point: every step's row, the upper triangle masked
            every = [f"{i + 1}: {token}" for i, token in enumerate(self.inputs)]
            self.add(f"{block}.{kind}.scores", block, "Scores and the causal mask",
                     f"The query of “{query}” scores the {keys_shown} decoder input(s) so far. Every decoder position "
                     "does the same, and the causal mask sets the scores of later positions to −∞: a position may not "
                     "look at what comes after it, since at decoding time it does not exist yet. The matrix has every "
                     f"step's row (row {position + 1} is this step); the mask is the same at every step.",
                     "s_ij = q_i · k_j / √d_k + M_ij,  M_ij = 0 if j ≤ i else −∞", MODULES["attention"],
                     [Numbers("scores", "s_j = q·k_j/√d_k (this step)", "row", scores[position, :keys_shown].numpy(),
                              cols=cols),
                      Numbers("masked_scores", "every step's scores after the causal mask", "matrix",
                              masked_as_inf(masked), rows=every, cols=self.inputs),
                      Numbers("d_k", "d_k", "scalar", hs)], ("causal mask", "score", "masked self-attention"))
            self.add(f"{block}.{kind}.softmax", block, "Softmax over the visible prefix",
                     "The softmax turns each row of scores into weights that sum to 1; e^−∞ = 0, so every masked "
                     f"entry gets weight exactly 0. Row {position + 1} is this step's query.",
                     "α_ij = e^(s_ij) / Σ_j' e^(s_ij')", MODULES["attention"],
                     [Numbers("weights", "α_j (this step)", "row", weights[position, :keys_shown].numpy(), cols=cols),
                      Numbers("all_weights", "every step's weights", "matrix", weights.numpy(), rows=every,
                              cols=self.inputs)], ("softmax", "attention weight"))
        else:
            mask_row = np.where(masked_as_inf(masked[position, :keys_shown]) == -np.inf, -np.inf, 0.0)
            self.add(f"{block}.{kind}.scores", block, "Scores: query · key / √d_k",
                     f"The query of “{query}” is compared with the key of every source piece by a dot product,"
                     f" divided by √d_k = √{hs} so the scores do not grow with the head size.",
                     "s_j = q · k_j / √d_k", MODULES["attention"],
                     [Numbers("scores", "s_j", "row", scores[position, :keys_shown].numpy(), cols=cols),
                      Numbers("keys", f"keys k_j (head {h + 1})", "matrix", k.numpy(), rows=cols),
                      Numbers("d_k", "d_k", "scalar", hs)], ("score", "key", "query"))
            self.add(f"{block}.{kind}.mask", block, "Padding mask",
                     "Padding (filler added to make sentences in a batch the same length) must never be attended to: "
                     "its scores are set to −∞. A sentence translated alone has no padding, so every key stays.",
                     "s_j ← s_j + M_j,  M_j = 0 for a real piece, −∞ for padding", MODULES["mask"],
                     [Numbers("mask", "M_j", "row", mask_row, cols=cols),
                      Numbers("masked_scores", "s_j after the mask", "row",
                              masked_as_inf(masked[position, :keys_shown]), cols=cols)], ("padding mask",))
            self.add(f"{block}.{kind}.softmax", block, "Softmax",
                     "The softmax turns the scores into weights between 0 and 1 that sum to 1: how much of each "
                     "value this head passes on to the query.",
                     "α_j = e^(s_j) / Σ_j' e^(s_j')", MODULES["attention"],
                     [Numbers("weights", "α_j", "row", weights[position, :keys_shown].numpy(), cols=cols)],
                     ("softmax", "attention weight"))
        self.add(f"{block}.{kind}.weighted_sum", block, "Weighted sum of the values",
                 f"Head {h + 1}'s output for “{query}” is the values added up with those weights.",
                 "head = Σ_j α_j v_j", MODULES["attention"],
                 [Numbers("values", f"values v_j (head {h + 1})", "matrix", v.numpy(), rows=cols),
                  Numbers("weights", "α_j", "row", weights[position, :keys_shown].numpy(), cols=cols),
                  vector("head_output", f"head {h + 1} output", head_out)], ("value", "head"))
        self.add(f"{block}.{kind}.concat", block, "Heads concatenated",
                 f"All {self.config.n_heads} heads ran the same steps with their own projections; their outputs "
                 f"({hs} numbers each) are laid side by side into one vector of {d}. Head {h + 1}'s part is the slice "
                 f"{h * hs + 1}–{(h + 1) * hs}.",
                 "concat = [head₁; head₂; …; head_H]", MODULES["heads"],
                 [vector("concat", "concat", concat, note=f"head {h + 1}: features {h * hs + 1}-{(h + 1) * hs}"),
                  Numbers("heads", "heads", "scalar", self.config.n_heads)], ("head",))

    def residual_stages(self, sub: str, block: str, position: int, before: torch.Tensor, what: str) -> torch.Tensor:
        rec = self.rec
        out = rec[f"{sub}_output"][0, position]
        total = rec[f"{sub}_sum"][0, position]
        if not sub.endswith("_ff"):
            self.add(f"{block}.{sub}.output", block, "Output projection W_O",
                     f"One more learned matrix ({self.config.d_model} × {self.config.d_model}) mixes the heads' "
                     "outputs back into the model's space: this is what the attention sub-layer adds.",
                     "out = concat W_O + b_O", MODULES["heads"],
                     [vector("output", "concat W_O + b_O", out), Numbers("norm", "‖out‖", "scalar", norm_of(out))],
                     ("W_O",))
        self.add(f"{block}.{sub}.residual", block, "Residual add",
                 f"The sub-layer's output is added to its input: the {what} only adds to the vector (the residual "
                 "stream) instead of replacing it, which keeps the token's identity and lets training reach deep "
                 "layers.",
                 "x ← x + sublayer(x)" if self.pre else "x ← x + sublayer(x), then layer norm", MODULES["residual"],
                 [vector("in", "x", before), vector("added", "sublayer(x)", out),
                  vector("sum", "x + sublayer(x)", total),
                  Numbers("added_share", "‖sublayer(x)‖ / ‖x‖", "scalar", norm_of(out) / max(norm_of(before), 1e-30))],
                 ("residual stream",))
        return total

    def feed_forward_stages(self, side: str, block: str, position: int) -> None:
        sub = f"{side}_ff"
        hidden = self.rec[f"{side}_ff_hidden"][0, position]
        out = self.rec[f"{sub}_output"][0, position]
        firing = int((hidden > 0).sum())
        # the activation the checkpoint's config names (ReLU, the paper's, unless it says otherwise)
        activation = str(getattr(self.config, "activation", "relu"))
        name = {"relu": "ReLU", "gelu": "GELU", "swish": "Swish", "silu": "SiLU"}.get(activation, activation)
        after = (f"After the ReLU, negative units are 0: {firing} of {self.config.d_ff} units fire for this token."
                 if activation == "relu" else
                 f"After the {name}, {firing} of {self.config.d_ff} units are above 0 for this token.")
        self.add(f"{block}.{sub}.hidden", block, "Feed-forward: hidden units",
                 f"Each position then goes, on its own, through a two-layer network: {self.config.d_model} → "
                 f"{self.config.d_ff} → {self.config.d_model}. {after}",
                 f"h = {name}(x W₁ + b₁)", MODULES["ff"],
                 [vector("hidden", f"{name}(x W₁ + b₁)", hidden), Numbers("firing", "units above 0", "scalar", firing),
                  Numbers("units", "hidden units", "scalar", self.config.d_ff)], ("feed-forward", "ReLU"))
        self.add(f"{block}.{sub}.output", block, "Feed-forward: back to d_model",
                 "The second matrix maps the hidden units back to the model's width: what the feed-forward block adds.",
                 "out = h W₂ + b₂", MODULES["ff"],
                 [vector("output", "h W₂ + b₂", out), Numbers("norm", "‖out‖", "scalar", norm_of(out))],
                 ("feed-forward",))

    def layer_in_full(self, side: str, kinds: list[str], block: str, position: int, x: torch.Tensor,
                      keys: dict[str, int]) -> torch.Tensor:
        """The first layer's sub-layers in the checkpoint's order; returns the layer's output at `position`."""
        for sub in kinds:
            is_ff = sub.endswith("_ff")
            if self.pre:
                self.norm_stage(sub, block, position, x, "Layer norm")
            if is_ff:
                self.feed_forward_stages(side, block, position)
            else:
                self.attention_stages(sub, block, position, keys[sub])
            x_after = self.residual_stages(sub, block, position, x, "feed-forward block" if is_ff else "attention")
            if not self.pre:
                self.norm_stage(sub, block, position, x_after, "Layer norm (after the add)")
                x = self.rec[f"{sub}_norm"][0, position]
            else:
                x = x_after
        return x

    def layers_compactly(self, side: str, subs: list[str], block: str, position: int, x0: torch.Tensor) -> None:
        hidden = self.rec[f"{side}_hidden"][:, position]
        rows, table = [], []
        previous = x0
        for layer in range(self.config.n_layers):
            added = [norm_of(self.rec[f"{sub}_output"][layer, position]) for sub in subs]
            rows.append(f"layer {layer + 1}")
            table.append([norm_of(previous), *added, norm_of(hidden[layer])])
            previous = hidden[layer]
        cols = ["‖input‖", *[{"encoder_self": "‖self-attention added‖", "decoder_self": "‖masked self-attn added‖",
                              "cross": "‖cross-attention added‖", "encoder_ff": "‖feed-forward added‖",
                              "decoder_ff": "‖feed-forward added‖"}[s] for s in subs], "‖output‖"]
        token = self.src[position] if side == "encoder" else self.inputs[position]
        self.add(f"{block}.layers", block, f"All {self.config.n_layers} {side} layers",
                 f"Every {side} layer repeats the same operations with its own weights. The table follows “{token}”'s "
                 "vector through them: its size going in, how much each sub-layer added, and its size coming out.",
                 "x_{l+1} = layer_l(x_l)", MODULES["layers"],
                 [Numbers("layers", "per layer", "matrix", np.array(table), rows=rows, cols=cols)], ("layer",))
        final = self.rec[f"{side}_final"][position]
        if self.config.final_norm:  # the decoder's is the first step out of the model
            self.add(f"{block}.final_norm", "output" if side == "decoder" else block, "Final layer norm",
                     f"A last layer norm after the {side} stack"
                     + (": its output is the memory the decoder's cross-attention reads." if side == "encoder" else
                        ": its output goes to the output projection."),
                     "h = LN(x_L)", "transformer/core/model.py (encoder_norm, decoder_norm)",
                     [vector("in", "x_L", hidden[-1]), vector("out", "LN(x_L)", final)], ("layer norm",))

    # ----- out of the model -----
    def output_stages(self, piece) -> None:
        t, step = self.t, self.step
        logits = self.rec["logits"][step]
        forbidden = forbid_never_produced(logits.clone()[None], self.config)[0]
        probs = forbidden.double().softmax(-1)
        top = probs.topk(TOP_CANDIDATES)
        top_ids = top.indices.tolist()
        top_pieces = [piece(i) for i in top_ids]
        chosen_id = t.tgt_ids[step]
        rank = int((probs > probs[chosen_id]).sum()) + 1
        tied = self.config.tie_output
        self.add("output.projection", "output", "Output projection: logits",
                 f"One score (logit) per piece of the target vocabulary ({logits.numel()} pieces): the dot product "
                 "of the final vector with each piece's output row, plus a bias. "
                 + ("This checkpoint ties the output projection to the target embedding: the same matrix that turned "
                    "ids into vectors turns the vector back into scores." if tied else
                    "This checkpoint learned a separate output matrix."),
                 "logits = h Wᵀ + b" + ("  (W = E, tied)" if tied else ""), MODULES["output"],
                 [Numbers("logits", "largest logits", "row", logits[top.indices].numpy(), cols=top_pieces),
                  Numbers("chosen_logit", f"logit of “{t.tgt_tokens[step]}”", "scalar", float(logits[chosen_id])),
                  Numbers("vocabulary", "pieces scored", "scalar", int(logits.numel()))], ("logit", "tied embeddings"))
        self.add("output.softmax", "output", "Softmax: next-piece probabilities",
                 "The softmax turns the logits into probabilities that sum to 1. Padding and the start token are never "
                 "produced, so "
                 f"their probability is set to 0 first. “{t.tgt_tokens[step]}” is ranked {rank}.",
                 "p_i = e^(logit_i) / Σ_j e^(logit_j)", MODULES["softmax"],
                 [Numbers("probabilities", "p", "row", top.values.numpy(), cols=top_pieces),
                  Numbers("chosen_probability", f"p(“{t.tgt_tokens[step]}”)", "scalar", float(probs[chosen_id])),
                  Numbers("rank", "its rank", "scalar", rank)], ("softmax", "probability"))
        decoded = t.steps[step]
        strategy, settings = t.strategy, {k: v for k, v in t.settings.items() if k not in ("max_length", "prefix")}
        how = {"greedy": "Greedy decoding takes the most probable piece.",
               "beam": f"Beam search keeps the {settings.get('beam_size', '')} best partial translations "
                       "(by the sum of their log-probabilities, divided by a length penalty) and extends each; the "
                       "piece here is the one on the winning hypothesis.",
               "sample": "Sampling draws a piece at random from the probabilities (after temperature, top-k and top-p)."
               }.get(strategy, f"The {strategy} strategy picks a piece from these probabilities.")
        following = t.tgt_tokens[step]
        fed = ("It is </s>: the translation ends here." if following == "</s>" else
               f"“{following}” is fed back as the decoder input of step {step + 2}, and the next step begins.")
        self.add("output.choice", "output", "Choosing the piece",
                 f"{how} {'Greedy would take' if strategy != 'greedy' else 'It takes'} “{top_pieces[0]}”; this "
                 f"translation ({strategy}) took “{following}”. {fed}",
                 {"greedy": "next = argmax_i p_i", "beam": "score = Σ log p / ((5 + length) / 6)^α",
                  "sample": "next ~ p (filtered)"}.get(strategy, "next = pick(p)"), MODULES["choose"],
                 [Numbers("strategy", "strategy", "tokens", [strategy], cols=["strategy"]),
                  Numbers("settings", "settings", "tokens", [settings.get(k) for k in settings], cols=list(settings)),
                  Numbers("decoded", "candidates as decoding saw them", "row",
                          np.array([p for _, p in decoded.topk]), cols=[tok for tok, _ in decoded.topk]),
                  Numbers("chosen", "chosen piece", "tokens", [following], cols=["piece"]),
                  Numbers("fed_back", "next decoder inputs", "tokens",
                          self.inputs[: step + 1] + ([following] if following != "</s>" else []),
                          cols=[str(i + 1) for i in range(step + 1 + (following != "</s>"))])],
                 ("greedy", "beam", "length penalty", "sampling", "temperature"))


def walkthrough(model: Transformer, tokenizer, translation, token: int = 0, step: int = 0, head: int = 0,
                heads_off=None) -> Walkthrough:
    """The walk-through of `translation` (a Translation, with src_ids, tgt_ids and steps) for source position `token`,
    decoding step `step` and head `head`, all 0-based, read from one teacher-forced pass with `heads_off` switched
    off."""
    config = model.config
    if not 0 <= token < len(translation.src_ids):
        raise ValueError(f"token must be in [0, {len(translation.src_ids) - 1}], got {token}")
    if not 0 <= step < len(translation.tgt_ids):
        raise ValueError(f"step must be in [0, {len(translation.tgt_ids) - 1}], got {step}")
    if not 0 <= head < config.n_heads:
        raise ValueError(f"head must be in [0, {config.n_heads - 1}], got {head}")
    rec = record_pass(model, translation.src_ids, translation.tgt_ids, heads_off)
    walk = _Walk(model, translation, rec, token, step, head, tokenizer.id_to_piece(config.decoder_start_id))
    walk.text_to_ids(tokenizer)
    walk.input_stages("encoder", token, walk.src[token])
    x0 = rec["encoder_input"][token]
    walk.layer_in_full("encoder", ["encoder_self", "encoder_ff"], "encoder", token, x0,
                       {"encoder_self": len(walk.src)})
    walk.layers_compactly("encoder", ["encoder_self", "encoder_ff"], "encoder", token, x0)
    walk.add("decoder.inputs", "decoder", "Decoder inputs so far",
             f"The decoder starts from <s> and is fed back each piece it produced. At step {step + 1} its inputs are "
             f"these {step + 1}; the last one, “{walk.inputs[step]}”, is where the next piece is predicted.",
             "inputs = <s>, y₁, …, y_{t−1}", "transformer/decoding/step_decoder.py (StepDecoder)",
             [Numbers("inputs", "decoder input", "tokens", walk.inputs[: step + 1], cols=walk.inputs[: step + 1])],
             ("<s>", "decoder"))
    walk.input_stages("decoder", step, walk.inputs[step])
    d0 = rec["decoder_input"][step]
    walk.layer_in_full("decoder", ["decoder_self", "cross", "decoder_ff"], "decoder", step, d0,
                       {"decoder_self": step + 1, "cross": len(walk.src)})
    walk.layers_compactly("decoder", ["decoder_self", "cross", "decoder_ff"], "decoder", step, d0)
    walk.output_stages(tokenizer.id_to_piece)
    for stage in walk.stages:  # cross-attention stages sit in their own block of the overview
        if ".cross." in stage.key:
            stage.block = "cross"
    architecture = {"norm": config.norm, "final_norm": config.final_norm, "pos_encoding": config.pos_encoding,
                    "tie_output": config.tie_output, "share_embeddings": config.share_embeddings,
                    "d_model": config.d_model, "n_heads": config.n_heads, "d_k": config.d_model // config.n_heads,
                    "d_ff": config.d_ff, "n_layers": config.n_layers, "tgt_vocab_size": config.tgt_vocab_size}
    return Walkthrough(translation.source, translation.text, token, step, head, architecture, walk.src, walk.inputs,
                       list(translation.tgt_tokens), walk.stages)


def walkthrough_analysis(access: ModelAccess, translation, token: int = 0, step: int = 0, head: int = 0) -> Walkthrough:
    """The walk-through as a registered analysis: `run_analysis` has switched the translation's heads off around it."""
    return walkthrough(access.model, access.tokenizer, translation, token, step, head)


ANALYSIS = Analysis("walkthrough", "How it computed this", Walkthrough, walkthrough_analysis, cheap=False,
                    description="every operation of the forward pass for one source piece and one decoding step")

__all__ = ["ANALYSIS", "Numbers", "Stage", "Walkthrough", "record_pass", "walkthrough", "walkthrough_analysis"]
