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

from .checkpoint import save_checkpoint
from .command_line import CommandParser
from .convert_marian import convert as convert_marian
from .convert_marian import converted, placed, resolve_source
from .core.model import Transformer
from .hub_families import (
    Weights,
    embedding_of,
    model_config_of,
    our_state,
    parameters_text,
)
from .hub_folder import FAMILY_NAMES, folder_tokenizer, read_object, read_weights, tokenizer_settings
from .hub_tokenizer import TOKENIZER_JSON
from .marian_config import ConversionError, license_of, recorded_decoding
from .spm_vocabulary import SPM_FILE, VOCAB_FILE

DTYPES = {"float32": torch.float32, "float16": torch.float16}  # how the converted weights are stored
# what a Hub name's download takes besides the config, the weights and the model card: every family's tokenizer
HUB_TOKENIZER_FILES = (TOKENIZER_JSON, SPM_FILE, VOCAB_FILE, "source.spm", "target.spm")


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
        (f"- **Languages**: {origin['languages']['src']} → {origin['languages']['tgt']}." if origin["languages"]["src"]
         else "- **Languages**: not stated (give --source-lang and --target-lang to label them)."),
        f"- **Weights**: {origin['dtype']}" + (" (every weight rounded to float16 by the converter: close to the "
                                               "original's numbers, not equal to them)." if origin["dtype"] ==
                                               "float16" else ", as in the original."),
        f"- **Recorded decoding** (from generation_config.json): {json.dumps(decoding)}.",
        "- **Equivalence**: tests/test_hub_families.py holds this family's logits, greedy output, tokenizer and "
        "attention equal to Hugging Face's on random models.", "",
    ])


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
    """Converts SRC, a Hugging Face folder or a Hub name (downloaded where the machine reaches the Hub), into the
    checkpoint folder `out`, which must not exist yet. `dtype` "float16" rounds every weight to float16 (half the
    folder): decoding then reads them through the float16 kernel, close to Hugging Face's numbers, not equal."""
    if dtype not in DTYPES:
        raise ConversionError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
    if Path(src).is_dir():
        return convert_folder(Path(src), Path(out), source_lang, target_lang, task_prefix, license, dtype, str(src))
    if Path(out).exists():
        raise ConversionError(f"{out}: already exists; give a new folder")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{Path(out).name}.downloading-", dir=Path(out).parent))
    try:
        folder = resolve_source(str(src), work, HUB_TOKENIZER_FILES)
        return convert_folder(folder, Path(out), source_lang, target_lang, task_prefix, license, dtype, str(src))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def convert_folder(folder: Path, out: Path, source_lang, target_lang, task_prefix, license, dtype: str,
                   name: str) -> Path:
    """`convert` of a local folder; `name` is what the model card says it came from."""
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
    # a multilingual model's default direction, else the labels given (none: the model is named by its folder)
    languages = {"src": settings.get("source_lang") or source_lang or "",
                 "tgt": settings.get("target_lang") or target_lang or ""}
    origin = {"source": name, "license": license_of(folder, license), "languages": languages,
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
        return placed(staging, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m transformer.convert",
        description="Convert a Hugging Face encoder-decoder folder (NLLB-200 / M2M100, mBART-50, T5 / FLAN-T5, "
                    "BART, Marian) into an Attention Explorer checkpoint folder.")
    parser.add_argument("src", metavar="SRC", help="a folder as save_pretrained writes it (config.json, weights, "
                                                   "tokenizer.json), or a Hub name such as "
                                                   "facebook/nllb-200-distilled-600M (needs the network)")
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
    out = converted(parser, args.out, lambda: convert(args.src, args.out, args.source_lang, args.target_lang,
                                                      args.task_prefix, args.license, args.dtype))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
