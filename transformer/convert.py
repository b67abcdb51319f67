"""A Hugging Face encoder-decoder folder as one of our checkpoint folders, whatever its family.

    python -m transformer.convert path/to/nllb-200-distilled-600M checkpoints/nllb-600m \\
        --source-lang eng_Latn --target-lang deu_Latn
    python -m transformer.convert path/to/flan-t5-small checkpoints/flan-t5-small \\
        --task-prefix "translate English to German: "

SRC is a local folder as `save_pretrained` writes it: config.json, generation_config.json, the weights
(model.safetensors, a sharded model.safetensors.index.json, or pytorch_model.bin through a weights-only load) and
tokenizer.json. config.json's `model_type` picks the family: m2m_100 (M2M100 and NLLB-200), mbart (mBART and
mBART-50), t5 (T5, T5 v1.1, FLAN-T5), bart, or marian (convert_marian.py's conversion). The arithmetic of each family
is a set of ModelConfig switches (hub_families.py); the tokenizer is its tokenizer.json run by the `tokenizers`
library (hub_tokenizer.py). Nothing here imports `transformers`.

OUT gets config.json, model.safetensors, tokenizer.json, metrics.json (the decoding generation_config.json asks for)
and a model card. It is written beside OUT under another name and renamed into place once it loads, so a failed
conversion leaves nothing at OUT.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .checkpoint import CheckpointError, save_checkpoint
from .command_line import CommandParser
from .convert_marian import convert as convert_marian
from .core.model import Transformer
from .decoding.translator import Translator
from .hub_families import (
    LANGUAGE_CODES,
    Weights,
    embedding_of,
    model_config_of,
    our_state,
    parameters_text,
)
from .hub_tokenizer import TOKENIZER_JSON, HubTokenizer
from .json_files import read_json
from .marian_config import ConversionError, license_of, recorded_decoding
from .spm_vocabulary import SPM_FILE

DTYPES = {"float32": torch.float32, "float16": torch.float16}  # how the converted weights are stored
FAMILY_NAMES = {"m2m_100": "M2M100 / NLLB-200", "mbart": "mBART", "t5": "T5", "bart": "BART"}


def read_object(path: Path) -> dict:
    return read_json(path, ConversionError)


def read_weights(folder: Path) -> tuple[dict[str, torch.Tensor], Path]:
    """Every tensor of the folder's weights, read without unpickling; and the file named in messages."""
    single, index, pickled = (folder / name for name in
                              ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"))
    try:
        if single.is_file():
            return load_file(str(single)), single
        if index.is_file():
            shards = sorted(set(read_object(index).get("weight_map", {}).values()))
            if not shards:
                raise ConversionError(f"{index}: has no weight_map")
            tensors = {}
            for shard in shards:
                if not (folder / shard).is_file():
                    raise ConversionError(f"{folder / shard}: file is missing (named by {index.name})")
                tensors.update(load_file(str(folder / shard)))
            return tensors, index
        if pickled.is_file():
            return torch.load(pickled, map_location="cpu", weights_only=True), pickled
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        path = single if single.is_file() else index if index.is_file() else pickled
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConversionError(f"{path}: truncated or unreadable ({first})") from None
    raise ConversionError(f"{folder}: no weights file (model.safetensors, model.safetensors.index.json or "
                          f"pytorch_model.bin)")


def tokenizer_settings(family: str, folder: Path, hf: dict, generation: dict, tokenizer: HubTokenizer,
                       source_lang: str | None, target_lang: str | None, task_prefix: str | None) -> dict:
    """What HubTokenizer needs beyond tokenizer.json: the special ids, the languages and where their codes go."""
    recorded_path = folder / "tokenizer_config.json"
    recorded = read_object(recorded_path) if recorded_path.is_file() else {}
    rust = tokenizer.tokenizer
    pattern = LANGUAGE_CODES.get(family)
    languages = {}
    if pattern is not None:
        # M2M100's tokens are __en__ for the code en, which its users (and Hugging Face's src_lang) name
        languages = {token.content.strip("_") if token.content.startswith("__") else token.content: i
                     for i, token in rust.get_added_tokens_decoder().items() if pattern.match(token.content)}
        if not languages:
            raise ConversionError(f"{folder / tokenizer.files[0]}: no language codes among its added tokens; a "
                                  f"{FAMILY_NAMES[family]} tokenizer adds them (e.g. eng_Latn, en_XX)")
    settings = {"type": "hub", "family": family, "pad_id": hf.get("pad_token_id"),
                "eos_id": hf.get("eos_token_id") if not isinstance(hf.get("eos_token_id"), list)
                else hf["eos_token_id"][0],
                "unk_id": rust.token_to_id(str(recorded.get("unk_token") or "<unk>")),
                "decoder_start_id": generation.get("decoder_start_token_id", hf.get("decoder_start_token_id")),
                "languages": languages, "source_layout": "plain",
                **({"language_codes": tokenizer.settings["language_codes"]}
                   if tokenizer.settings.get("language_codes") else {})}
    if settings["unk_id"] is None:
        raise ConversionError(f"{folder / tokenizer.files[0]}: has no unknown token ({recorded.get('unk_token')!r})")
    if family == "t5":
        settings["decoder_start_id"] = settings["decoder_start_id"] if settings["decoder_start_id"] is not None \
            else settings["pad_id"]
        settings["task_prefix"] = task_prefix or ""
    elif task_prefix:
        raise ConversionError(f"--task-prefix is T5's; a {FAMILY_NAMES[family]} model takes none")
    if family == "bart":
        settings["source_layout"] = "bos"
        settings["bos_token_id"] = hf.get("bos_token_id", 0)
        forced = generation.get("forced_bos_token_id", hf.get("forced_bos_token_id"))
        settings["forced_first"] = forced if isinstance(forced, int) else None
    if languages:
        legacy = bool(recorded.get("legacy_behaviour")) or (
            family == "mbart" and recorded.get("tokenizer_class") in ("MBartTokenizer", "MBartTokenizerFast"))
        settings["source_layout"] = "suffix" if legacy else "prefix"
        start = settings["decoder_start_id"]
        # mBART (cc25) starts the decoder at the target language itself; the others force it after </s>
        settings["forced_first"] = None if start in languages.values() else "target_lang"
        for flag, code, fallback in (("--source-lang", source_lang, recorded.get("src_lang")),
                                     ("--target-lang", target_lang, recorded.get("tgt_lang"))):
            chosen = code or fallback
            if chosen is None:
                raise ConversionError(f"{folder}: a multilingual model; pass {flag} with one of its "
                                      f"{len(languages)} codes, e.g. {sorted(languages)[0]}")
            if chosen not in languages:
                raise ConversionError(f"{flag}: unknown language code {chosen!r}; this model has "
                                      f"{', '.join(sorted(languages)[:6])}, ... ({len(languages)} in all)")
        settings["source_lang"] = source_lang or recorded.get("src_lang")
        settings["target_lang"] = target_lang or recorded.get("tgt_lang")
    elif source_lang or target_lang:
        raise ConversionError(f"--source-lang / --target-lang: a {FAMILY_NAMES[family]} model has no language "
                              f"codes; leave them out")
    return settings


def model_card(name: str, family: str, origin: dict, config, decoding: dict, parameters: int,
               languages: dict) -> str:
    positions = {"sinusoidal": f"sinusoidal positions ({config.sinusoidal_layout} layout)",
                 "learned": "learned positions", "relative": "relative position buckets"}[config.pos_encoding]
    return "\n".join([
        f"# {name}", "",
        f"A {FAMILY_NAMES[family]} model (`model_type` {family}) converted from the Hugging Face folder "
        f"`{origin['source']}` by `python -m transformer.convert`.", "",
        f"- **License**: {origin['license']} (the original model's; see its model card for attribution).",
        f"- **Architecture**: {config.norm}-norm ({config.norm_kind} norm), {config.stacks_text()} "
        f"({'gated ' if config.gated_ff else ''}{config.activation}), d_model {config.d_model}, {positions}, "
        f"vocabulary {config.tgt_vocab_size:,}, {parameters:,} parameters ({parameters_text(parameters)}).",
        f"- **Languages**: {len(languages)} codes; this folder translates {origin['languages']['src']} → "
        f"{origin['languages']['tgt']} by default." if languages else
        f"- **Languages**: {origin['languages']['src']} → {origin['languages']['tgt']}.",
        f"- **Weights**: {origin['dtype']}" + (" (every weight rounded to float16 by the converter: close to the "
                                               "original's numbers, not equal to them)." if origin["dtype"] ==
                                               "float16" else ", as in the original."),
        f"- **Recorded decoding** (from generation_config.json): {json.dumps(decoding)}.",
        "- **Equivalence**: tests/test_hub_families.py holds this family's logits, greedy output, tokenizer and "
        "attention equal to Hugging Face's on random models.", "",
    ])


def folder_tokenizer(folder: Path, family: str) -> HubTokenizer:
    """The folder's tokenizer.json, or M2M100's sentencepiece.bpe.model and vocab.json as transformers 5 saves them
    (no tokenizer.json), with placeholder special ids: tokenizer_settings reads the real ones."""
    recorded = folder / "tokenizer_config.json"
    spm_only = family == "m2m_100" and not (folder / TOKENIZER_JSON).is_file() and (folder / SPM_FILE).is_file()
    codes = (read_object(recorded) if recorded.is_file() else {}).get("language_codes", "m2m100")
    try:
        return HubTokenizer.load(folder, {"pad_id": 0, "unk_id": 0, "eos_id": 0, "decoder_start_id": 0,
                                          "source_layout": "plain", **({"language_codes": codes} if spm_only else {})})
    except (FileNotFoundError, ValueError) as error:
        raise ConversionError(str(error)) from None


def loaded_model(weights: Weights, family: str, hf: dict, config) -> Transformer:
    """Our model with the family's tensors, every tensor of the file taken and every one of ours given, each of the
    shape config.json implies."""
    state, tied = our_state(weights, family, hf, config)
    if weights.left():
        raise ConversionError(f"{weights.path}: tensors this converter does not know: {weights.left()[:5]}")
    model = Transformer(replace(config, tie_output=tied))
    expected = model.state_dict()
    for name, tensor in state.items():
        if name not in expected:
            raise ConversionError(f"{weights.path}: no place for {name!r} in a model of config.json's shape")
        if tensor.shape != expected[name].shape:
            raise ConversionError(f"{weights.path}: a tensor for {name!r} has shape {list(tensor.shape)}; "
                                  f"config.json implies {list(expected[name].shape)}")
    missing = sorted(set(expected) - set(state))
    if missing:
        raise ConversionError(f"{weights.path}: tensors missing for {missing[:3]}")
    model.load_state_dict(state)
    return model


def convert(src, out, source_lang: str | None = None, target_lang: str | None = None,
            task_prefix: str | None = None, license: str | None = None, dtype: str = "float32") -> Path:
    """Converts the Hugging Face folder SRC into the checkpoint folder `out`, which must not exist yet. `dtype`
    "float16" rounds every weight to float16 (half the folder): decoding then reads them through the float16 kernel,
    close to Hugging Face's numbers rather than equal to them."""
    if dtype not in DTYPES:
        raise ConversionError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    folder, out = Path(src), Path(out)
    if not folder.is_dir():
        raise ConversionError(f"{folder}: no such folder (give the folder save_pretrained wrote)")
    hf = read_object(folder / "config.json")
    family = hf.get("model_type")
    if family == "marian":
        if dtype != "float32":
            raise ConversionError("--dtype float16: the Marian converter writes float32 weights")
        return convert_marian(str(folder), out, source_lang, target_lang, license)
    if out.exists():
        raise ConversionError(f"{out}: already exists; give a new folder")
    if family not in FAMILY_NAMES:
        raise ConversionError(f"{folder / 'config.json'}: model_type is {family!r}; the families that convert are "
                              f"{', '.join(FAMILY_NAMES)} and marian")
    generation_file = folder / "generation_config.json"
    generation = read_object(generation_file) if generation_file.is_file() else {}
    tokenizer = folder_tokenizer(folder, family)
    tensors, weights_file = read_weights(folder)
    weights = Weights(tensors, weights_file)
    embedding = embedding_of(weights, family)
    vocab_size = embedding.shape[0]
    if tokenizer.vocab_size > vocab_size:
        raise ConversionError(f"{folder / tokenizer.files[0]}: {tokenizer.vocab_size:,} tokens, more than the "
                              f"weights' {vocab_size:,} embedding rows: not this model's tokenizer")
    settings = tokenizer_settings(family, folder, hf, generation, tokenizer, source_lang, target_lang, task_prefix)
    settings["vocab_size"] = vocab_size
    model = loaded_model(weights, family, hf, model_config_of(hf, folder / "config.json", vocab_size,
                                                              settings["unk_id"]))
    config = model.config
    decoding = recorded_decoding({**hf, **generation}, config, generation_file)
    languages = {"src": settings.get("source_lang") or "source", "tgt": settings.get("target_lang") or "target"}
    origin = {"source": str(src), "license": license_of(folder, license), "languages": languages,
              "family": family, "architecture": (hf.get("architectures") or [family])[0], "dtype": dtype}
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.converting-", dir=out.parent))
    try:
        staging = work / "checkpoint"
        save_checkpoint(staging, model, [folder / name for name in tokenizer.files],
                        {"languages": languages, "tokenizer": settings, "origin": origin},
                        {"origin": origin, "parameters": model.num_parameters(), "decoding": decoding},
                        DTYPES[dtype])
        (staging / "README.md").write_text(model_card(out.name, family, origin, config, decoding,
                                                      model.num_parameters(), settings["languages"]),
                                           encoding="utf-8")
        try:  # the folder must load as ours before it is moved into place
            Translator.from_pretrained(staging)
        except CheckpointError as error:
            raise ConversionError(f"the converted folder does not load: {error}") from None
        staging.rename(out)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m transformer.convert",
        description="Convert a Hugging Face encoder-decoder folder (NLLB-200 / M2M100, mBART-50, T5 / FLAN-T5, "
                    "BART, Marian) into an Attention Explorer checkpoint folder.")
    parser.add_argument("src", metavar="SRC", help="a folder as save_pretrained writes it (config.json, weights, "
                                                   "tokenizer.json)")
    parser.add_argument("out", metavar="OUT", help="the checkpoint folder to write (must not exist)")
    parser.add_argument("--source-lang", help="a multilingual model's default source language code, e.g. eng_Latn "
                                              "(NLLB) or en_XX (mBART-50); default: tokenizer_config.json's src_lang")
    parser.add_argument("--target-lang", help="its default target language code, e.g. deu_Latn or de_DE; default: "
                                              "tokenizer_config.json's tgt_lang")
    parser.add_argument("--task-prefix", help="T5 only: the text put before every source, e.g. "
                                              "'translate English to German: ' (default: none)")
    parser.add_argument("--license", help="the license the model card names (default: the source README.md's)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                        help="float32 (default): Hugging Face's numbers exactly; float16: every weight rounded to "
                             "float16, half the folder, decoded through the float16 kernel where the family's "
                             "layers fit it")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        out = convert(args.src, args.out, args.source_lang, args.target_lang, args.task_prefix, args.license,
                      args.dtype)
    except ConversionError as error:
        parser.error(str(error))
    except OSError as error:  # OUT's parent is a file, its folder read-only, the disk full: nothing was written
        parser.error(f"{error.filename or args.out}: {error.strerror or error}")
    except Exception as error:  # noqa: BLE001  (any other failure is still one line, and leaves no folder)
        parser.error(f"conversion failed: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
