"""What a visitor asked for, as one typed value: the page's controls, an API call and a shared link each build a
`Request` through one constructor, and every check lives here. A bad value raises `RequestError`, which names
the field at fault, so the page can put the message on that input and the API can say which argument to fix.

Layers and heads inside a request are numbered from 0; the text forms people write ("cross 3 2" in heads_off,
layer=3 in a link) are numbered from 1 and converted here and in heads_off.py, nowhere else.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from urllib.parse import urlencode

from transformer.choices import ChoiceError, checked_choice
from transformer.core.head_mask import HeadMaskError, check_heads_off
from transformer.decoding.strategies import STRATEGIES, SettingError, build_settings, get_strategy
from transformer.decoding.translator import LanguageSettingError
from transformer.numbers import NumberError, checked_number, parsed_number
from transformer.unicode_text import MAX_CHARACTERS as MAX_CHARACTERS  # the limit every surface shares
from transformer.unicode_text import TextError, check_text, checked_lines

from .heads_off import format_heads_off, parse_heads_off

MAX_LINES = 8  # sentences per request
MAX_OUTPUT_TOKENS = 128
DEFAULT_MAX_LENGTH = 64
DEVICES = ("cpu", "cuda")


class RequestError(SettingError):
    """A request value that cannot be used; `field` names it (a request field, or a strategy setting's name)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Request:
    text: str
    lines: tuple[str, ...]  # the sentences to translate, one per non-empty line of `text`
    model: str  # a registry key
    device: str
    strategy: str
    settings: dict  # the chosen strategy's own settings, checked, by name
    max_length: int
    prefix: str  # forced start of every translation ("" for none)
    heads_off: tuple[tuple[str, int, int], ...]  # (kind, layer, head), 0-based
    # a multilingual model's languages by code (NLLB's eng_Latn, mBART-50's en_XX); None: its converted direction
    source_lang: str | None = None
    target_lang: str | None = None

    @classmethod
    def build(cls, registry, text, model=None, device="cpu", strategy=None, settings: dict | None = None,
              max_length=DEFAULT_MAX_LENGTH, prefix=None, heads_off=None, text_field: str = "text",
              source_lang=None, target_lang=None) -> "Request":
        """The one constructor: every value checked, the first bad one raised as a RequestError naming it.
        `settings` are the chosen strategy's own, by name (its namespace: another strategy may have a setting of
        the same name). A strategy or setting not given (None) is the model's recorded decoding (metrics.json:
        how it was tuned on val), else the strategy's default. `heads_off` is text numbered from 1
        ("cross 3 2; decoder_self 1 4") or (kind, layer, head) entries numbered from 0. `text_field`: the name the
        caller gave the text (/patch's `clean`), used in its errors. `source_lang`, `target_lang`: a multilingual
        model's languages by code ("" or None: the direction it was converted for)."""
        for field, value in ((text_field, text), ("model", model), ("device", device), ("strategy", strategy),
                             ("prefix", prefix), ("heads_off", heads_off), ("source_lang", source_lang),
                             ("target_lang", target_lang)):
            check_unicode(field, value)
        lines = split_lines(text, text_field)
        model = registry.default_key if model is None else model
        choice("model", model, sorted(registry.models),
               unknown=f"unknown model {model!r}; available: {sorted(registry.models)}")
        choice("device", device, DEVICES, unknown=f"device must be 'cpu' or 'cuda', got {device!r}")
        if strategy not in (None, ""):  # either: the model's recorded decoding
            choice("strategy", strategy, STRATEGIES)
        translator = registry.get(model).translator
        strategy, recorded = resolved_strategy(translator, strategy)
        if settings is not None and not isinstance(settings, dict):
            raise RequestError("settings", f"settings must be a dict of {strategy!r}'s settings by name, "
                                           f"got {type(settings).__name__}")
        given = {name: value for name, value in (settings or {}).items() if value is not None}
        checked = checked_settings(strategy, {**recorded, **given})
        max_length = check_max_length(max_length)
        try:
            translator.prefix_ids(prefix, max_length)
        except SettingError as error:
            raise RequestError("prefix", str(error)) from None
        source_lang, target_lang = source_lang or None, target_lang or None
        try:
            translator.language_start(source_lang, target_lang)
        except LanguageSettingError as error:
            raise RequestError(error.name, str(error)) from None
        heads = as_head_entries(heads_off)
        if isinstance(heads_off, str):  # typed numbered from 1: a head out of range is named as it was typed
            check_typed_heads(heads, translator.model.config)
        try:
            check_heads_off(translator.model, heads)
        except HeadMaskError as error:
            raise RequestError("heads_off", str(error)) from None
        return cls(text, tuple(lines), model, device, strategy, checked, max_length, prefix or "", tuple(heads or ()),
                   source_lang, target_lang)

    @classmethod
    def from_api(cls, registry, text, model=None, device="cpu", strategy=None, settings: dict | None = None,
                 max_length=DEFAULT_MAX_LENGTH, prefix=None, heads_off=None, text_field: str = "text",
                 source_lang=None, target_lang=None) -> "Request":
        """From the API's named arguments: `settings` holds the chosen strategy's settings ({"beam_size": 4});
        `text_field`: the text's name in the caller's arguments, for its errors."""
        return cls.build(registry, text, model, device, strategy, settings, max_length, prefix, heads_off,
                         text_field, source_lang, target_lang)

    @classmethod
    def from_page(cls, registry, values: dict) -> "Request":
        """From the page's request controls by component name (controls.REQUEST_INPUTS and every setting's
        `key`): every strategy's controls are on the page, and only the chosen strategy's are read."""
        strategy = values["strategy"]
        specs = get_strategy(strategy).specs if strategy in STRATEGIES else []
        return cls.build(registry, values["source"], values["model"], values["device"], strategy,
                         {spec.name: values[spec.key] for spec in specs}, values["max_length"], values["prefix"],
                         values["heads_off"], source_lang=values.get("source_lang"),
                         target_lang=values.get("target_lang"))

    @classmethod
    def from_link(cls, registry, params: dict) -> "Request":
        """From a shared link's query string (values are text): the chosen strategy's settings by name; the view
        keys are read by share.py."""
        model = params.get("model") if params.get("model") in registry.models else None
        strategy, _ = resolved_strategy(registry.get(model or registry.default_key).translator, params.get("strategy"))
        settings = {spec.name: number(spec.name, params[spec.name], spec.kind, spec.minimum, spec.maximum)
                    for spec in get_strategy(strategy).specs if spec.name in params}
        max_length = (number("max_length", params["max_length"], int, 1, MAX_OUTPUT_TOKENS) if "max_length" in params
                      else DEFAULT_MAX_LENGTH)
        return cls.build(registry, params.get("text", ""), params.get("model"), params.get("device", "cpu"),
                         strategy, settings, max_length, params.get("prefix"), params.get("heads_off"),
                         source_lang=params.get("source_lang"), target_lang=params.get("target_lang"))

    def to_link(self) -> str:
        """The query string that rebuilds this request (numbered from 1, as links are)."""
        params = {"text": self.text, "model": self.model, "device": self.device, "strategy": self.strategy,
                  **self.settings, "max_length": self.max_length}
        if self.prefix:
            params["prefix"] = self.prefix
        if self.heads_off:
            params["heads_off"] = format_heads_off(self.heads_off)
        for name in ("source_lang", "target_lang"):
            if getattr(self, name):
                params[name] = getattr(self, name)
        return urlencode(params)

    def api_arguments(self) -> dict:
        """The API's named arguments that rebuild this request, text aside."""
        return {"model": self.model, "device": self.device, "strategy": self.strategy, "settings": dict(self.settings),
                "max_length": self.max_length, "prefix": self.prefix,
                "heads_off": format_heads_off(self.heads_off) if self.heads_off else "",
                "source_lang": self.source_lang, "target_lang": self.target_lang}

    def page_values(self) -> dict:
        """The page's request controls, by component name, set to this request (from_page's inverse)."""
        arguments = self.api_arguments()
        settings = {f"{self.strategy}.{name}": value for name, value in arguments.pop("settings").items()}
        return {"source": self.text, **arguments, **settings}


def choice(field: str, value, choices, optional: bool = False, unknown: str | None = None) -> None:
    """A choice-like field (model, device, strategy, kind, side) checked by the one choice rule
    (transformer/choices.py): a string among `choices`, else a RequestError naming the field; a JSON object or list
    is refused before it is looked up."""
    try:
        checked_choice(field, value, choices, optional, unknown)
    except ChoiceError as error:
        raise RequestError(field, str(error)) from None


def resolved_strategy(translator, strategy) -> tuple[str, dict]:
    """(strategy, its recorded settings): the one given, else the model's recorded decoding."""
    try:
        return translator.recorded_decoding(strategy)
    except SettingError as error:
        raise RequestError("strategy", str(error)) from None


def check_unicode(field: str, value) -> None:
    """Text that no encoding can hold (a lone UTF-16 surrogate, as a raw JSON call may send "\\ud800") is refused by
    the field's name before anything reads it, by the package's one Unicode rule (transformer/unicode_text.py); a
    value that is not text is left to the field's own check."""
    if isinstance(value, str):
        try:
            check_text(field, value)
        except TextError as error:
            raise RequestError(field, str(error)) from None


def split_lines(text, field: str = "text") -> list[str]:
    """The text's non-empty lines (unicode_text.checked_lines, the rule the command lines share); a text that is
    empty or too long is a RequestError naming `field` ("Source text" for the page's and the API's `text`, else the
    caller's own name for it, such as /patch's `clean`)."""
    if not isinstance(text, str):
        text = ""  # no text at all reads as an empty one
    try:
        return checked_lines(field, text, MAX_LINES, "Source text" if field == "text" else field)
    except TextError as error:
        raise RequestError(field, str(error)) from None


def checked_settings(strategy: str, settings: dict) -> dict:
    """The chosen strategy's settings, each checked against its own range; a bad one is named by its key
    ("beam.beam_size"), a name the strategy does not have by "settings"."""
    specs = {spec.name: spec for spec in get_strategy(strategy).specs}
    unknown = sorted(set(settings) - set(specs))
    if unknown:
        raise RequestError("settings", f"unknown settings {unknown} for strategy {strategy!r}; its settings are "
                                       f"{sorted(specs)}")
    for name, value in settings.items():
        try:
            specs[name].check(value)
        except SettingError as error:
            raise RequestError(specs[name].key, str(error)) from None
    return asdict(build_settings(strategy, settings))


def check_max_length(value) -> int:
    try:
        return checked_number("max_length", value, int, 1, MAX_OUTPUT_TOKENS)
    except NumberError as error:
        raise RequestError("max_length", str(error)) from None


def as_head_entries(heads_off) -> list[tuple[str, int, int]] | None:
    if heads_off is None or isinstance(heads_off, str):
        try:
            return parse_heads_off(heads_off)
        except SettingError as error:
            raise RequestError("heads_off", str(error)) from None
    if not isinstance(heads_off, (list, tuple)):
        raise RequestError(
            "heads_off",
            'heads_off must be text such as "cross 3 2; decoder_self 1 4" (numbered from 1) '
            f"or a list of [kind, layer, head] numbered from 0, got {heads_off!r}",
        )
    return [tuple(entry) if isinstance(entry, (list, tuple)) else entry for entry in heads_off]  # checked later


def check_typed_heads(heads, config) -> None:
    for ref in heads or []:
        stack = config.stack_of(ref.kind)  # the encoder's and the decoder's shapes may differ
        if not (0 <= ref.layer < stack.layers and 0 <= ref.head < stack.heads):
            raise RequestError("heads_off", f"heads_off entry {ref.entry!r} is out of range: this model's {ref.kind} "
                                            f"layers are numbered 1-{stack.layers} and its heads 1-{stack.heads}")


def number(name: str, text: str, kind: type, low, high):
    """A link's text value as a finite number of `kind` in [low, high] (numbered as the link numbers it); a bad one
    is named with the range and the text as sent."""
    try:
        return parsed_number(f"{name} in the link", text, kind, low, high)
    except NumberError as error:
        raise RequestError(name, str(error)) from None
