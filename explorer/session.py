"""One visitor request: validated settings in, translations with their traces out."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch

from transformer import Translation
from transformer.core.head_mask import HeadMaskError, check_heads_off
from transformer.decoding.strategies import SettingError, build_settings, get_strategy

from .registry import Registry

MAX_LINES = 8  # sentences per request
MAX_CHARACTERS = 2000  # per request; longer input is refused with a message
MAX_OUTPUT_TOKENS = 128
DEFAULT_MAX_LENGTH = 64
DEVICES = ("cpu", "cuda")


@dataclass
class RunResult:
    model_key: str
    device: str
    strategy: str
    settings: dict  # the strategy's settings as used, and max_length
    translations: list[Translation]
    milliseconds: float
    notices: list[str] = field(default_factory=list)
    rendered_views: set[str] = field(default_factory=set)  # the page's views drawn for this result so far

    @property
    def strategy_label(self) -> str:
        return get_strategy(self.strategy).label


def split_lines(text: str) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        raise SettingError("Source text is empty: type a sentence to translate.")
    if len(text) > MAX_CHARACTERS:
        raise SettingError(f"Source text has {len(text):,} characters; the limit is {MAX_CHARACTERS:,} per request.")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_LINES:
        raise SettingError(f"Source text has {len(lines)} lines; the limit is {MAX_LINES} sentences per request.")
    return lines


def check_max_length(value) -> int:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != int(value) \
            or not 1 <= value <= MAX_OUTPUT_TOKENS:
        raise SettingError(f"max_length must be in [1, {MAX_OUTPUT_TOKENS}], got {value!r}")
    return int(value)


def check_request(registry: Registry, text: str, model_key: str, device: str, strategy: str, settings: dict,
                  max_length, prefix, heads_off=None) -> tuple[list[str], dict, int, object]:
    """Everything about a request that can be wrong, checked before any decoding: (lines, the strategy's
    settings, max_length, the served model); a SettingError names the first problem."""
    lines = split_lines(text)
    strategy_settings = asdict(build_settings(strategy, settings))
    max_length = check_max_length(max_length)
    if device not in DEVICES:
        raise SettingError(f"device must be 'cpu' or 'cuda', got {device!r}")
    try:
        served = registry.get(model_key)
    except KeyError as error:
        raise SettingError(str(error.args[0])) from error
    served.translator.prefix_ids(prefix, max_length)
    try:
        check_heads_off(served.translator.model, heads_off)
    except HeadMaskError as error:
        raise SettingError(str(error)) from None
    return lines, strategy_settings, max_length, served


def run(registry: Registry, text: str, model_key: str, device: str, strategy: str, settings: dict,
        max_length=DEFAULT_MAX_LENGTH, prefix: str | list[str] | None = "", heads_off=None) -> RunResult:
    """`settings`: any registered strategy settings by name (see transformer/decoding/strategies); `prefix`
    forces the start of every translation (text, or a list of pieces); `heads_off` lists (kind, layer, head),
    0-based, to switch off."""
    lines, strategy_settings, max_length, served = check_request(registry, text, model_key, device, strategy,
                                                                 settings, max_length, prefix, heads_off)
    translator, notice = served.on(device)
    notices = [notice] if notice else []

    def translate_with(chosen):
        return chosen.translate_batch(lines, strategy=strategy, max_length=max_length, capture=True, prefix=prefix,
                                      logit_lens=True, heads_off=heads_off, **strategy_settings)

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
    if any(t.tgt_tokens[-1:] == ["</s>"] and t.steps[-1].forced for t in translations):
        notices.append("The forced prefix contains </s>: the translation ends there.")
    return RunResult(model_key, "cuda" if translator.model.device.type == "cuda" else "cpu", strategy,
                     {**strategy_settings, "max_length": max_length, "prefix": prefix or "",
                      **({"heads_off": translations[0].settings.get("heads_off", [])} if heads_off else {})},
                     translations, elapsed, notices)
