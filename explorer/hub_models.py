"""Hugging Face models the app converts when it starts and serves beside checkpoints/: Marian (OPUS-MT), and the
families transformer/convert.py converts (NLLB-200, M2M100, mBART-50, T5, BART):

    ATTENTION_EXPLORER_HUB_MODELS="Helsinki-NLP/opus-mt-en-de,facebook/nllb-200-distilled-600M:eng_Latn:deu_Latn"
    ATTENTION_EXPLORER_HUB_CACHE=/data/converted     # where the converted folders are kept (default below)

A multilingual model's entry names its default direction after the name, `name:source:target`. Each named model is
downloaded and converted once into the cache folder, under its name's last part ("opus-mt-en-de"), and served from
there on later starts without the network. A model that cannot be converted (no network, an unknown family) is
skipped and logged; the app starts with the others. Converting a Marian model imports `transformers`
(pip install ".[marian]"); the other families need only `huggingface_hub` for the download.
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from transformer.convert import convert
from transformer.marian_config import ConversionError

log = logging.getLogger(__name__)

SWITCH, CACHE_SWITCH = "ATTENTION_EXPLORER_HUB_MODELS", "ATTENTION_EXPLORER_HUB_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "attention-explorer" / "hub"
NAME = re.compile(r"[\w.-]+/[\w.-]+(:[\w-]+:[\w-]+)?")  # owner/name, then :source:target for a multilingual one


def hub_models_from_environment() -> list[str]:
    """The Hub names ATTENTION_EXPLORER_HUB_MODELS lists (comma-separated), with a message naming it when bad."""
    text = os.environ.get(SWITCH, "").strip()
    names = [name.strip() for name in text.split(",") if name.strip()] if text else []
    bad = [name for name in names if not NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"{SWITCH} must be comma-separated Hub model names such as Helsinki-NLP/opus-mt-en-de "
                         f"(a multilingual one with its direction: facebook/nllb-200-distilled-600M:eng_Latn:deu_Latn)"
                         f", got {bad[0]!r}")
    return names


def cache_from_environment() -> Path:
    return Path(os.environ.get(CACHE_SWITCH) or DEFAULT_CACHE)


def converted_folders(names: list[str], cache: Path) -> tuple[list[Path], dict[str, str]]:
    """The checkpoint folder of each named model, converted into `cache` where it is not there yet; and the models
    that could not be converted, with why."""
    folders, problems = [], {}
    for entry in names:
        name, _, direction = entry.partition(":")
        source, _, target = direction.partition(":")
        folder = cache / name.split("/")[-1]
        if not (folder / "config.json").is_file():
            try:
                convert(name, folder, source or None, target or None)
            except ImportError:
                problems[name] = f"{SWITCH} needs transformers: pip install \".[marian]\""
                continue
            except ConversionError as error:
                problems[name] = str(error)
                continue
        folders.append(folder)
    for name, why in problems.items():
        log.warning("Hub model %s not served: %s", name, why)
    return folders, problems
