"""The Hugging Face encoder-decoder families as our ModelConfig and our tensor names: M2M100 and NLLB-200 (`m2m_100`),
mBART and mBART-50 (`mbart`), T5 v1.0, v1.1 and FLAN-T5 (`t5`) and BART (`bart`). convert.py reads a folder with them.

Each family is a handful of switches over the same blocks (core/config.py), read from the arithmetic of
transformers' modeling_m2m_100.py, modeling_mbart.py, modeling_t5.py and modeling_bart.py:

    family   norm            positions                                  feed-forward     other
    m2m_100  pre, LayerNorm  fairseq sinusoids from pad_id + 1          relu (config)    final norms, sqrt(D) scale
    mbart    pre, LayerNorm  learned, first row 2                       gelu (config)    final norms, embedding norm
    bart     post, LayerNorm learned, first row 2                       gelu (config)    embedding norm
    t5       pre, RMS norm   relative bias per stack (buckets)          relu / gated     no biases, no 1/sqrt(hs)

T5 has no biases: ours are loaded as zeros, which add nothing. T5 v1.0 ties the output projection to the embedding and
multiplies the decoder's output by D^-0.5 first; that factor is folded into the decoder's final norm's weight.
"""
from __future__ import annotations

import math
import re

import torch

from .core.config import ModelConfig
from .marian_config import ConversionError

FAMILIES = ("m2m_100", "mbart", "t5", "bart")
# the language codes each multilingual family's tokenizer adds as special tokens
LANGUAGE_CODES = {
    # M2M100's __de__, NLLB's deu_Latn
    "m2m_100": re.compile(r"^(__[a-z]{2,3}(_[A-Za-z]+)?__|[a-z]{3}_[A-Z][a-z]{3})$"),
    "mbart": re.compile(r"^[a-z]{2}_[A-Z]{2}$"),  # en_XX, de_DE
}
HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                  "silu": "silu", "swish": "swish"}


def _integer(hf: dict, key: str, path, default=None) -> int:
    value = hf.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConversionError(f"{path}: {key} must be a non-negative integer, got {value!r}")
    return value


def _activation(name, path) -> str:
    if name not in HF_ACTIVATIONS:
        raise ConversionError(f"{path}: unsupported activation {name!r}; supported: {sorted(HF_ACTIVATIONS)}")
    return HF_ACTIVATIONS[name]


def _single(value):
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def model_config_of(hf: dict, path, vocab_size: int, unk_id: int) -> ModelConfig:
    """Our ModelConfig for a family's config.json, or a ConversionError naming what it does not support."""
    family = hf.get("model_type")
    if family not in FAMILIES:
        raise ConversionError(f"{path}: model_type is {family!r}; the families that convert are "
                              f"{', '.join(FAMILIES)} and marian")
    if hf.get("vocab_size") != vocab_size:
        raise ConversionError(f"{path}: vocab_size {hf.get('vocab_size')!r} does not match the weights' "
                              f"{vocab_size} embedding rows")
    common = {"src_vocab_size": vocab_size, "tgt_vocab_size": vocab_size, "share_embeddings": True,
              "unk_id": unk_id, "pad_id": _integer(hf, "pad_token_id", path),
              "eos_id": _single(hf.get("eos_token_id")), "decoder_start_id": hf.get("decoder_start_token_id")}
    if family == "t5":
        projection = hf.get("feed_forward_proj", "relu")
        gated = projection.startswith("gated-")
        activation = projection.split("-")[-1]
        activation = "gelu_new" if projection == "gated-gelu" else activation  # as T5Config reads it
        fields = dict(
            d_model=_integer(hf, "d_model", path), n_heads=_integer(hf, "num_heads", path),
            n_layers=_integer(hf, "num_layers", path), d_ff=_integer(hf, "d_ff", path),
            decoder_layers=_integer(hf, "num_decoder_layers", path, hf.get("num_layers")),
            head_dim=_integer(hf, "d_kv", path), norm="pre", norm_kind="rms",
            norm_eps=float(hf.get("layer_norm_epsilon", 1e-6)), pos_encoding="relative",
            relative_buckets=_integer(hf, "relative_attention_num_buckets", path, 32),
            relative_max_distance=_integer(hf, "relative_attention_max_distance", path, 128),
            max_len=512,  # T5 has no position table; long enough for any sentence the page takes
            attention_scale=False, gated_ff=gated, activation=_activation(activation, path),
            scale_embedding=False, dropout=float(hf.get("dropout_rate", 0.1)))
        if common["decoder_start_id"] is None:  # T5 starts from <pad>
            common["decoder_start_id"] = common["pad_id"]
    else:
        if hf.get("add_bias_logits") or hf.get("add_final_layer_norm") or hf.get("normalize_embedding") is False:
            raise ConversionError(f"{path}: unsupported add_bias_logits / add_final_layer_norm / "
                                  f"normalize_embedding settings (mBART-50's and BART's are supported)")
        fields = dict(
            d_model=_integer(hf, "d_model", path), n_heads=_integer(hf, "encoder_attention_heads", path),
            n_layers=_integer(hf, "encoder_layers", path), d_ff=_integer(hf, "encoder_ffn_dim", path),
            decoder_heads=_integer(hf, "decoder_attention_heads", path),
            decoder_layers=_integer(hf, "decoder_layers", path), decoder_ff=_integer(hf, "decoder_ffn_dim", path),
            max_len=_integer(hf, "max_position_embeddings", path),
            activation=_activation(hf.get("activation_function", "gelu"), path),
            scale_embedding=bool(hf.get("scale_embedding", False)),
            dropout=float(hf.get("dropout", 0.1)), attention_dropout=float(hf.get("attention_dropout", 0.0)),
            norm="post" if family == "bart" else "pre", final_norm=family != "bart",
            embedding_norm=family != "m2m_100")
        if family == "m2m_100":
            fields.update(pos_encoding="sinusoidal", sinusoidal_layout="fairseq",
                          position_offset=common["pad_id"] + 1)
        else:
            fields.update(pos_encoding="learned", decoder_positions=True, position_offset=2)
    try:
        return ModelConfig(**common, **fields)
    except (TypeError, ValueError) as error:
        raise ConversionError(f"{path}: {error}") from None


class Weights:
    """The folder's tensors by Hugging Face's names; every one must be taken, so a tensor this converter does not
    know is named rather than dropped."""

    def __init__(self, tensors: dict[str, torch.Tensor], path):
        self.tensors = {name: tensor.float() for name, tensor in tensors.items()}
        self.path, self.taken = path, set()

    def find(self, *names: str) -> str | None:
        return next((name for name in names if name in self.tensors), None)

    def take(self, *names: str) -> torch.Tensor:
        """The first of `names` present (a tied matrix is saved under one of its names)."""
        name = self.find(*names)
        if name is None:
            raise ConversionError(f"{self.path}: tensor {names[0]!r} is missing")
        for alias in names:  # a tied matrix's other names, where the file keeps them too, are the same tensor
            if alias in self.tensors:
                self.taken.add(alias)
        return self.tensors[name]

    def left(self) -> list[str]:
        return sorted(set(self.tensors) - self.taken)


def embedding_of(weights: Weights, family: str) -> torch.Tensor:
    if family == "t5":
        return weights.take("shared.weight", "encoder.embed_tokens.weight", "decoder.embed_tokens.weight")
    return weights.take("model.shared.weight", "model.encoder.embed_tokens.weight",
                        "model.decoder.embed_tokens.weight")


def our_state(weights: Weights, family: str, hf: dict, config: ModelConfig) -> tuple[dict, bool]:
    """Our state dict from the family's tensors, and whether the output projection is the embedding (tied)."""
    state: dict[str, torch.Tensor] = {}
    embedding = embedding_of(weights, family)
    state["src_embed.embedding.weight"] = state["tgt_embed.embedding.weight"] = embedding
    zeros = torch.zeros
    if family == "t5":
        _t5_layers(weights, config, state)
        tied = weights.find("lm_head.weight") is None or torch.equal(weights.tensors["lm_head.weight"], embedding)
        state["generator.weight"] = weights.take("lm_head.weight") if not tied else embedding
        if "lm_head.weight" in weights.tensors:
            weights.take("lm_head.weight")
        state["generator.bias"] = zeros(config.tgt_vocab_size)
        # T5 v1.0: the decoder's output times D^-0.5 before the tied projection, folded into the final norm (the
        # flag transformers 5 writes, else what it reads it from: tie_word_embeddings left unset or true)
        if hf.get("scale_decoder_outputs", hf.get("tie_word_embeddings") is not False):
            state["decoder_norm.weight"] = state["decoder_norm.weight"] * config.d_model ** -0.5
        return state, tied
    _bart_layers(weights, family, config, state)
    output = weights.find("lm_head.weight")
    tied = output is None or torch.equal(weights.tensors[output], embedding)
    state["generator.weight"] = weights.take(output) if output is not None else embedding
    bias = weights.find("final_logits_bias")
    state["generator.bias"] = weights.take(bias).reshape(-1) if bias else zeros(config.tgt_vocab_size)
    return state, tied


def _attention(weights: Weights, state: dict, ours: str, theirs: str, names=("q", "k", "v", "o"), bias=True):
    q, k, v, o = (f"{theirs}.{n}" for n in names)
    state[f"{ours}.in_proj.weight"] = torch.cat([weights.take(f"{p}.weight") for p in (q, k, v)])
    state[f"{ours}.out_proj.weight"] = weights.take(f"{o}.weight")
    if bias:
        state[f"{ours}.in_proj.bias"] = torch.cat([weights.take(f"{p}.bias") for p in (q, k, v)])
        state[f"{ours}.out_proj.bias"] = weights.take(f"{o}.bias")
    else:
        state[f"{ours}.in_proj.bias"] = torch.zeros(state[f"{ours}.in_proj.weight"].shape[0])
        state[f"{ours}.out_proj.bias"] = torch.zeros(state[f"{ours}.out_proj.weight"].shape[0])


def _linear(weights: Weights, state: dict, ours: str, theirs: str, bias=True):
    state[f"{ours}.weight"] = weights.take(f"{theirs}.weight")
    state[f"{ours}.bias"] = weights.take(f"{theirs}.bias") if bias else torch.zeros(state[f"{ours}.weight"].shape[0])


def _norm(weights: Weights, state: dict, ours: str, theirs: str, bias=True):
    state[f"{ours}.weight"] = weights.take(f"{theirs}.weight")
    if bias:
        state[f"{ours}.bias"] = weights.take(f"{theirs}.bias")


def _bart_layers(weights: Weights, family: str, config: ModelConfig, state: dict) -> None:
    """M2M100, mBART and BART: one layout, `self_attn`, `encoder_attn`, `fc1`, `fc2` and a norm after each name."""
    attention = ("q_proj", "k_proj", "v_proj", "out_proj")
    for side, count in (("encoder", config.encoder.layers), ("decoder", config.decoder.layers)):
        for i in range(count):
            ours, theirs = f"{side}_layers.{i}", f"model.{side}.layers.{i}"
            residual = "attention_residual" if side == "encoder" else "self_attention_residual"
            _attention(weights, state, f"{ours}.self_attention", f"{theirs}.self_attn", attention)
            _norm(weights, state, f"{ours}.{residual}.norm", f"{theirs}.self_attn_layer_norm")
            if side == "decoder":
                _attention(weights, state, f"{ours}.cross_attention", f"{theirs}.encoder_attn", attention)
                _norm(weights, state, f"{ours}.cross_attention_residual.norm", f"{theirs}.encoder_attn_layer_norm")
            _linear(weights, state, f"{ours}.feed_forward.fc1", f"{theirs}.fc1")
            _linear(weights, state, f"{ours}.feed_forward.fc2", f"{theirs}.fc2")
            _norm(weights, state, f"{ours}.feed_forward_residual.norm", f"{theirs}.final_layer_norm")
        if config.final_norm:
            _norm(weights, state, f"{side}_norm", f"model.{side}.layer_norm")
        if config.embedding_norm:
            _norm(weights, state, f"{side}_embedding_norm", f"model.{side}.layernorm_embedding")
        if config.pos_encoding == "learned":
            table = weights.take(f"model.{side}.embed_positions.weight")
            expected = config.max_len + config.position_offset
            if table.shape[0] != expected:
                raise ConversionError(f"{weights.path}: model.{side}.embed_positions.weight has {table.shape[0]} "
                                      f"rows; config.json's max_position_embeddings implies {expected}")
            state[f"{'positions' if side == 'encoder' else 'target_positions'}.embedding.weight"] = table
    for name in weights.left():  # the sinusoids M2M100 saves with some versions are computed, not read
        if family == "m2m_100" and name.endswith("embed_positions.weights"):
            weights.take(name)


def _t5_layers(weights: Weights, config: ModelConfig, state: dict) -> None:
    ff = ("wi_0", "wi_1", "wo") if config.gated_ff else ("wi", None, "wo")
    for side, count in (("encoder", config.encoder.layers), ("decoder", config.decoder.layers)):
        for i in range(count):
            ours, theirs = f"{side}_layers.{i}", f"{side}.block.{i}.layer"
            residual = "attention_residual" if side == "encoder" else "self_attention_residual"
            _attention(weights, state, f"{ours}.self_attention", f"{theirs}.0.SelfAttention", bias=False)
            _norm(weights, state, f"{ours}.{residual}.norm", f"{theirs}.0.layer_norm", bias=False)
            last = 1
            if side == "decoder":
                _attention(weights, state, f"{ours}.cross_attention", f"{theirs}.1.EncDecAttention", bias=False)
                _norm(weights, state, f"{ours}.cross_attention_residual.norm", f"{theirs}.1.layer_norm", bias=False)
                last = 2
            dense = f"{theirs}.{last}.DenseReluDense"
            if config.gated_ff:
                _linear(weights, state, f"{ours}.feed_forward.fc_gate", f"{dense}.{ff[0]}", bias=False)
            _linear(weights, state, f"{ours}.feed_forward.fc1", f"{dense}.{ff[1] or ff[0]}", bias=False)
            _linear(weights, state, f"{ours}.feed_forward.fc2", f"{dense}.{ff[2]}", bias=False)
            _norm(weights, state, f"{ours}.feed_forward_residual.norm", f"{theirs}.{last}.layer_norm", bias=False)
        _norm(weights, state, f"{side}_norm", f"{side}.final_layer_norm", bias=False)
        table = weights.take(f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight")
        state[f"{side}_position_bias.embedding.weight"] = table


def parameters_text(count: int) -> str:
    """615M, 61M, 2.3M: the size a model card names."""
    exponent = max(0, int(math.log10(max(count, 1))) // 3 * 3)
    unit = {0: "", 3: "K", 6: "M", 9: "B"}[min(exponent, 9)]
    return f"{count / 10 ** min(exponent, 9):.3g}{unit}"
