"""What a Hugging Face Marian folder's JSON files say, read into ours: config.json as our ModelConfig (or a
ConversionError naming what our Transformer does not compute), generation_config.json as the recorded decoding, and
the languages and license the converted folder is labelled with. convert_marian.py converts with them."""
from __future__ import annotations

import json
import re
from pathlib import Path

from .core.config import ModelConfig
from .json_files import read_json

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "silu"}  # Hugging Face name -> ours
# config.json flags of the Bart family that change the arithmetic, with the one value Marian (and our model) has
FIXED_FLAGS = {
    "normalize_before": False,  # pre-norm layers: Marian is post-norm
    "add_final_layer_norm": False,  # a final LayerNorm per stack
    "normalize_embedding": False,  # a LayerNorm on the embeddings
    "layernorm_embedding": False,
    "static_position_embeddings": True,  # learned positions instead of the sinusoids
    "add_bias_logits": False,
    "is_encoder_decoder": True,
    "is_decoder": False,
    "scale_attention": True,
}
# config.json keys read into ModelConfig (or checked against each other)
READ_KEYS = {
    "model_type", "architectures", "vocab_size", "decoder_vocab_size", "d_model", "encoder_layers", "decoder_layers",
    "encoder_attention_heads", "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
    "max_position_embeddings", "activation_function", "scale_embedding", "pad_token_id", "eos_token_id",
    "decoder_start_token_id", "share_encoder_decoder_embeddings", "tie_word_embeddings", "dropout",
    "attention_dropout", "num_hidden_layers", "separate_vocabs",
}
# keys that do not change a translation's numbers: training-only settings, generation defaults (generation_config.json
# is read for those), label maps and bookkeeping
INERT_KEYS = {
    "_name_or_path", "_num_labels", "transformers_version", "torch_dtype", "dtype", "activation_dropout",
    "encoder_layerdrop", "decoder_layerdrop", "init_std", "use_cache", "gradient_checkpointing", "classif_dropout",
    "classifier_dropout", "id2label", "label2id", "num_labels", "bos_token_id", "forced_eos_token_id",
    "bad_words_ids", "num_beams", "max_length", "min_length", "length_penalty", "early_stopping",
    "no_repeat_ngram_size", "num_return_sequences", "output_attentions", "output_hidden_states", "return_dict",
    "extra_pos_embeddings", "output_past", "model_max_length", "tokenizer_class", "prefix", "task_specific_params",
    "chunk_size_feed_forward", "problem_type", "pruned_heads", "torchscript", "use_return_dict",
    "renormalize_logits", "do_sample", "temperature", "top_k", "top_p", "repetition_penalty", "num_beam_groups",
    "diversity_penalty", "tf_legacy_loss", "use_bfloat16",
}


class ConversionError(Exception):
    """Something the converter does not support or cannot read; its message is one line naming it."""


def read_json_object(path: Path) -> dict:
    return read_json(path, ConversionError)


def model_config_of(hf: dict, path: Path, vocabulary: dict[str, int]) -> ModelConfig:
    """Our ModelConfig for a Marian config.json, or a ConversionError naming what it does not support."""
    if hf.get("model_type") != "marian":
        raise ConversionError(f"{path}: model_type is {hf.get('model_type')!r}; only Marian models ('marian') convert")
    unknown = sorted(set(hf) - READ_KEYS - INERT_KEYS - set(FIXED_FLAGS))
    if unknown:
        raise ConversionError(f"{path}: unsupported config key {unknown[0]!r} (this converter does not know whether it "
                              f"changes the arithmetic)")
    for flag, value in FIXED_FLAGS.items():
        if flag in hf and hf[flag] != value:
            raise ConversionError(f"{path}: unsupported {flag}={json.dumps(hf[flag])} (our Transformer computes "
                                  f"Marian's {flag}={json.dumps(value)})")
    activation = hf.get("activation_function", "gelu")
    if activation not in ACTIVATIONS:
        raise ConversionError(f"{path}: unsupported activation_function {activation!r}; "
                              f"supported: {sorted(ACTIVATIONS)}")
    vocab_size = hf.get("vocab_size")
    if hf.get("separate_vocabs") or hf.get("decoder_vocab_size") not in (None, vocab_size):
        raise ConversionError(f"{path}: unsupported separate source and target vocabularies (decoder_vocab_size "
                              f"{hf.get('decoder_vocab_size')} != vocab_size {vocab_size})")
    if vocab_size != len(vocabulary):
        raise ConversionError(f"{path}: vocab_size {vocab_size} does not match vocab.json's {len(vocabulary)} pieces")
    eos = hf.get("eos_token_id")
    try:
        return ModelConfig(
            src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=hf.get("d_model"),
            # each stack its own shape (a distilled student: a deep encoder, a shallow decoder); the shared fields
            # take the encoder's, as Marian's num_hidden_layers does
            n_heads=hf.get("encoder_attention_heads"), n_layers=hf.get("encoder_layers"),
            d_ff=hf.get("encoder_ffn_dim"), encoder_heads=hf.get("encoder_attention_heads"),
            encoder_layers=hf.get("encoder_layers"), encoder_ff=hf.get("encoder_ffn_dim"),
            decoder_heads=hf.get("decoder_attention_heads"), decoder_layers=hf.get("decoder_layers"),
            decoder_ff=hf.get("decoder_ffn_dim"),
            dropout=float(hf.get("dropout", 0.1)), attention_dropout=float(hf.get("attention_dropout", 0.0)),
            max_len=hf.get("max_position_embeddings"), norm="post", final_norm=False, pos_encoding="sinusoidal",
            sinusoidal_layout="halves", activation=ACTIVATIONS[activation],
            scale_embedding=bool(hf.get("scale_embedding", False)),
            share_embeddings=bool(hf.get("share_encoder_decoder_embeddings", True)),
            tie_output=bool(hf.get("tie_word_embeddings", True)),
            pad_id=hf.get("pad_token_id"), unk_id=vocabulary["<unk>"],
            decoder_start_id=hf.get("decoder_start_token_id"),
            eos_id=eos[0] if isinstance(eos, list) and len(eos) == 1 else eos,
        )
    except (TypeError, ValueError) as error:
        raise ConversionError(f"{path}: {error}") from None


def recorded_decoding(generation: dict, config: ModelConfig, path: Path) -> dict:
    """metrics.json's "decoding" from generation_config.json: its beam size and length limit, pad never produced."""
    banned = generation.get("bad_words_ids") or []
    never_produced = {config.pad_id, config.decoder_start_id}
    if any(not isinstance(ids, list) or len(ids) != 1 or ids[0] not in never_produced for ids in banned):
        raise ConversionError(f"{path}: unsupported bad_words_ids {banned} (our decoding forbids only the pad and "
                              f"start tokens, id {config.pad_id})")
    beams = generation.get("num_beams", 1)
    if not isinstance(beams, int) or not 1 <= beams <= 8:
        raise ConversionError(f"{path}: num_beams must be an integer in [1, 8], got {beams!r}")
    max_length = generation.get("max_length", config.max_len)
    if not isinstance(max_length, int) or max_length < 2:
        raise ConversionError(f"{path}: max_length must be an integer >= 2, got {max_length!r}")
    decoding = {"strategy": "beam", "beam_size": beams} if beams > 1 else {"strategy": "greedy"}
    # Hugging Face counts the start token in max_length; ours counts output tokens (</s> included)
    decoding["max_length"] = min(max_length - 1, config.max_len)
    if beams > 1:
        # Hugging Face divides a beam's score by length^penalty; ours is GNMT's ((5 + length) / 6)^alpha, so the
        # same number is close, not equal
        decoding["length_penalty"] = float(generation.get("length_penalty", 1.0))
    return decoding


def languages_of(src: str, folder: Path, source_lang: str | None, target_lang: str | None) -> dict:
    tokenizer_config = folder / "tokenizer_config.json"
    recorded = read_json_object(tokenizer_config) if tokenizer_config.is_file() else {}
    named = re.search(r"opus-mt-([a-z]{2,3})-([a-z]{2,3})\b", src)
    src_lang = source_lang or recorded.get("source_lang") or (named and named.group(1))
    tgt_lang = target_lang or recorded.get("target_lang") or (named and named.group(2))
    for flag, code in (("--source-lang", src_lang), ("--target-lang", tgt_lang)):
        if not code:
            raise ConversionError(f"{src}: the languages are not recorded (tokenizer_config.json) or in the name; "
                                  f"pass {flag}")
        if not re.fullmatch(r"[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*", str(code)):
            raise ConversionError(f"{flag} must be a language code such as 'en' or 'pt_BR', got {code!r}")
    return {"src": str(src_lang), "tgt": str(tgt_lang)}


def license_of(folder: Path, given: str | None) -> str:
    if given:
        return given
    card = folder / "README.md"
    if card.is_file():
        front = re.match(r"---\n(.*?)\n---", card.read_text(encoding="utf-8", errors="replace"), re.S)
        found = front and re.search(r"^license:\s*(\S+)", front.group(1), re.M)
        if found:
            return found.group(1)
    return "not stated in the source folder"
