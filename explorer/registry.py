"""Checkpoints served by the app: every folder under checkpoints/ with a config.json, and the extra folders it is
given (Hub models converted at start-up, explorer/hub_models.py), loaded once at start-up.

A folder that fails to load is skipped and reported (the app starts with the good ones); with no usable
checkpoint at all, start-up fails with a message that says how to fix it.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import torch

from transformer import Translator
from transformer.checkpoint import CheckpointError

from .profile import ModelProfile, profile_model

log = logging.getLogger(__name__)

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}
PAGE_LANGUAGE = "en"  # the page's own language: the default model translates from it where one does
DEFAULT_MODEL_SETTING = "ATTENTION_EXPLORER_DEFAULT_MODEL"  # environment: the served model the page opens on


class NoUsableCheckpoint(RuntimeError):
    pass


@dataclass
class ServedModel:
    key: str  # folder name, e.g. "en-de"
    label: str  # e.g. "English → German (en-de)"
    translator: Translator  # on the CPU
    profile: ModelProfile  # what the views draw about the model itself, computed once here
    # added while the server runs (a playground run opened in every tab): translated in the server's process, since
    # the translation workers (run_pool.py) loaded only the models served at start-up
    local: bool = False
    _cuda: Translator | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, device: str) -> tuple[Translator, str | None]:
        """The translator on `device`, or on the CPU with a notice saying why."""
        if device != "cuda":
            return self.translator, None
        if not torch.cuda.is_available():
            return self.translator, "CUDA is not available on this server: translated on the CPU."
        with self._lock:
            if self._cuda is None:
                try:
                    self._cuda = Translator.from_pretrained(self.translator.source, device="cuda")
                except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
                    return self.translator, f"Could not load the model on CUDA ({error}): translated on the CPU."
        return self._cuda, None


@dataclass
class Registry:
    models: dict[str, ServedModel]
    problems: dict[str, str]  # folder -> why it was skipped

    @property
    def choices(self) -> list[tuple[str, str]]:
        return [(m.label, key) for key, m in self.models.items()]

    def languages(self, key: str) -> list[str]:
        """A multilingual model's language codes, sorted ([] for a model of one direction)."""
        return sorted(getattr(self.get(key).translator.tokenizer, "languages", None) or {})

    def default_languages(self, key: str) -> tuple[str | None, str | None]:
        """The source and target codes a multilingual model was converted for, (None, None) for the others."""
        tokenizer = self.get(key).translator.tokenizer
        return getattr(tokenizer, "default_source", None), getattr(tokenizer, "default_target", None)

    def source_language(self, key: str) -> str | None:
        return self.get(key).translator.config.get("languages", {}).get("src")

    @property
    def default_key(self) -> str:
        """The model the page opens on and a request without one gets: the served model named by the setting
        ATTENTION_EXPLORER_DEFAULT_MODEL where it is set, else the first served one (in folder order) that
        translates from the page's own language, else the first served one."""
        named = os.environ.get(DEFAULT_MODEL_SETTING)
        if named:
            if named not in self.models:
                raise ValueError(f"{DEFAULT_MODEL_SETTING} must be one of the served models {sorted(self.models)}, "
                                 f"got {named!r}")
            return named
        return next((key for key in self.models if self.source_language(key) == PAGE_LANGUAGE), next(iter(self.models)))

    def add(self, key: str, folder: Path, label: str) -> ServedModel:
        """Serves the checkpoint in `folder` as `key` from now on (a playground run opened in every tab); a key
        already served is returned as it is."""
        if key not in self.models:
            translator = Translator.from_pretrained(folder, device="cpu")
            self.models[key] = ServedModel(key, label, translator, profile_model(translator), local=True)
        return self.models[key]

    def get(self, key: str) -> ServedModel:
        if key not in self.models:
            raise KeyError(f"unknown model {key!r}; available: {sorted(self.models)}")
        return self.models[key]


def direction_label(key: str, config: dict) -> str:
    languages = config.get("languages", {})
    src, tgt = languages.get("src"), languages.get("tgt")
    if not src or not tgt:
        return key
    return f"{LANGUAGE_NAMES.get(src, src)} → {LANGUAGE_NAMES.get(tgt, tgt)} ({key})"


def discover(root: Path, extra=()) -> Registry:
    """Every checkpoint folder under `root`, then the checkpoint folders `extra`, keyed by folder name (a later
    folder of a name already served is skipped and reported)."""
    models, problems = {}, {}
    folders = sorted(p for p in Path(root).iterdir() if p.is_dir()) if Path(root).is_dir() else []
    for folder in folders + [Path(p) for p in extra]:
        if folder.name in models:
            problems[str(folder)] = f"a checkpoint named {folder.name!r} is already served"
            continue
        if not (folder / "config.json").is_file():
            continue
        try:
            translator = Translator.from_pretrained(folder, device="cpu")
        except (CheckpointError, OSError, ValueError) as error:
            problems[folder.name] = str(error)
            log.warning("skipping checkpoint %s: %s", folder, error)
            continue
        models[folder.name] = ServedModel(folder.name, direction_label(folder.name, translator.config), translator,
                                          profile_model(translator))
    if not models:
        details = "; ".join(f"{name}: {why}" for name, why in problems.items()) or "no folder with a config.json"
        raise NoUsableCheckpoint(
            f"no usable checkpoint under {root} ({details}). Restore the shipped one with "
            "`git checkout -- checkpoints/` "
            "or train one with `python -m transformer.train --out checkpoints/en-de`."
        )
    registry = Registry(models, problems)
    registry.default_key  # a default model setting that names no served model stops the start here, named
    return registry
