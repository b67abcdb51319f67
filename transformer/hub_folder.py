"""What a Hugging Face folder holds, read for convert.py: its JSON files, its weights (safetensors, sharded or not, or a
`pytorch_model.bin` through a weights-only load: nothing is unpickled), its tokenizer (tokenizer.json, or M2M100's
sentencepiece.bpe.model and vocab.json) and the settings our HubTokenizer needs beyond it: the special ids, the
language codes and where each family puts them."""
from __future__ import annotations

import re
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .hub_families import LANGUAGE_CODES
from .hub_tokenizer import TOKENIZER_JSON, HubTokenizer
from .json_files import read_json
from .marian_config import ConversionError
from .spm_vocabulary import SPM_FILE

LABEL = re.compile(r"[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*")  # a language code labelling a model of one direction
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
    else:  # a model of one direction: the languages only label it (T5 translating English to German: en, de)
        for flag, code in (("--source-lang", source_lang), ("--target-lang", target_lang)):
            if code is not None and not LABEL.fullmatch(code):
                raise ConversionError(f"{flag} must be a language code such as 'en' or 'pt_BR', got {code!r}")
    return settings
