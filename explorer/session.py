"""One visitor request: validated settings in, translations with their steps and attention out."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from transformer import Translation

from .registry import Registry

MAX_LINES = 8  # sentences per request
MAX_CHARACTERS = 2000  # per request; longer input is refused with a message
MAX_OUTPUT_TOKENS = 128
STRATEGY_LABELS = {"greedy": "greedy", "beam": "beam search", "sample": "sampling"}


class SettingError(ValueError):
    """A request setting out of range; the message names the setting and its allowed range."""


@dataclass
class DecodingSettings:
    strategy: str = "greedy"
    beam_size: int = 4
    length_penalty: float = 0.6
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0
    max_length: int = 64

    def validate(self) -> "DecodingSettings":
        def check(name, value, low, high, kind):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or (kind is int and value != int(value)):
                raise SettingError(f"{name} must be {'an integer' if kind is int else 'a number'} in [{low}, {high}], got {value!r}")
            if not low <= value <= high:
                raise SettingError(f"{name} must be in [{low}, {high}], got {value!r}")
            return kind(value)

        if self.strategy not in STRATEGY_LABELS:
            raise SettingError(f"strategy must be one of {list(STRATEGY_LABELS)}, got {self.strategy!r}")
        self.beam_size = check("beam_size", self.beam_size, 1, 8, int)
        self.length_penalty = check("length_penalty", self.length_penalty, 0.0, 2.0, float)
        self.top_k = check("top_k", self.top_k, 0, 1000, int)
        self.seed = check("seed", self.seed, 0, 2**31 - 1, int)
        self.max_length = check("max_length", self.max_length, 1, MAX_OUTPUT_TOKENS, int)
        self.temperature = check("temperature", self.temperature, 0.01, 10.0, float)
        self.top_p = check("top_p", self.top_p, 0.01, 1.0, float)
        return self


@dataclass
class RunResult:
    model_key: str
    device: str
    settings: DecodingSettings
    translations: list[Translation]
    milliseconds: float
    notices: list[str] = field(default_factory=list)


def split_lines(text: str) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        raise SettingError("Source text is empty: type a sentence to translate.")
    if len(text) > MAX_CHARACTERS:
        raise SettingError(f"Source text has {len(text):,} characters; the limit is {MAX_CHARACTERS:,} per request.")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        raise SettingError(f"Source text has {len(lines)} lines; the limit is {MAX_LINES} sentences per request.")
    return lines


def run(registry: Registry, text: str, model_key: str, device: str, settings: DecodingSettings) -> RunResult:
    lines = split_lines(text)
    settings.validate()
    if device not in ("cpu", "cuda"):
        raise SettingError(f"device must be 'cpu' or 'cuda', got {device!r}")
    try:
        served = registry.get(model_key)
    except KeyError as error:
        raise SettingError(str(error.args[0])) from error
    translator, notice = served.on(device)
    notices = [notice] if notice else []

    def translate_with(chosen):
        return chosen.translate_batch(
            lines, strategy=settings.strategy, beam_size=settings.beam_size, length_penalty=settings.length_penalty,
            temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p, seed=settings.seed,
            max_length=settings.max_length, capture=True,
        )

    started = time.perf_counter()
    try:
        translations = translate_with(translator)
    except torch.cuda.OutOfMemoryError:
        if translator is served.translator:
            raise
        translator = served.translator
        notices.append("CUDA ran out of memory for this request: translated on the CPU.")
        translations = translate_with(translator)
    elapsed = (time.perf_counter() - started) * 1000
    cut = [i + 1 for i, t in enumerate(translations) if t.truncated]
    if cut:
        notices.append(f"Line(s) {cut} exceeded the model's {translator.model.config.max_len - 1} source tokens: "
                       "only the first part was translated.")
    return RunResult(model_key, "cuda" if translator.model.device.type == "cuda" else "cpu", settings,
                     translations, elapsed, notices)
