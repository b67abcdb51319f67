"""The decoding strategies, by name: each with a settings dataclass (defaults and allowed ranges) and a
decode function. The translator, the request validation, the app's controls, the evaluation CLI and the
API all read this one table, so a new strategy is one file plus one line in `strategies/__init__.py`.

A setting is a dataclass field made with `setting(...)`; its metadata carries the label and range:

    @dataclass
    class BeamSettings:
        beam_size: int = setting(4, 1, 8, "Beam size")

A decode function takes (model, sources, settings, max_length, probes, use_cache, prefixes) and returns
one `DecodedSentence` per source (see decoded.py); `prefixes`, when given, are target ids to force at the
first steps of each sentence (single_path.py and beam.py show how).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields

from ...choices import ChoiceError, checked_choice
from ...numbers import NumberError, checked_number


class SettingError(ValueError):
    """A decoding setting that is unknown or out of range; the message names it and its allowed range."""


def setting(default, minimum, maximum, label: str, step=None, help: str = ""):
    """A dataclass field for a strategy setting: its type is that of `default` (int or float)."""
    return field(default=default, metadata={"minimum": minimum, "maximum": maximum, "label": label,
                                            "step": step, "help": help})


@dataclass(frozen=True)
class SettingSpec:
    name: str
    kind: type  # int or float
    default: float
    minimum: float
    maximum: float
    label: str
    step: float | None
    help: str
    strategy: str

    @property
    def key(self) -> str:
        """The setting's name within its strategy's namespace ("beam.length_penalty"): unique across strategies."""
        return f"{self.strategy}.{self.name}"

    def check(self, value):
        """The value as `kind`, or a SettingError naming the setting and its range (the one number rule:
        NaN, infinities and text are refused like a value out of range)."""
        try:
            return checked_number(self.name, value, self.kind, self.minimum, self.maximum)
        except NumberError as error:
            raise SettingError(str(error)) from None


@dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    settings: type  # a dataclass whose fields are made with `setting(...)`
    decode: Callable
    description: str = ""

    @property
    def specs(self) -> list[SettingSpec]:
        specs = []
        for f in fields(self.settings):
            if f.default is MISSING or "minimum" not in f.metadata:
                raise TypeError(f"{self.settings.__name__}.{f.name} must be declared with setting(...)")
            m = f.metadata
            specs.append(SettingSpec(f.name, type(f.default), f.default, m["minimum"], m["maximum"], m["label"],
                                     m["step"], m["help"], self.name))
        return specs


STRATEGIES: dict[str, Strategy] = {}


def register(strategy: Strategy) -> Strategy:
    """Adds (or replaces) a strategy. Its settings are its own namespace: two strategies may each have a
    setting of the same name, with their own ranges (SettingSpec.key tells them apart)."""
    strategy.specs  # a field not declared with setting(...) is refused here, not at the first request
    STRATEGIES[strategy.name] = strategy
    return strategy


def unregister(name: str) -> None:
    STRATEGIES.pop(name, None)


def get_strategy(name) -> Strategy:
    try:
        checked_choice("strategy", name, STRATEGIES)
    except ChoiceError as error:
        raise SettingError(str(error)) from None
    return STRATEGIES[name]


def all_settings() -> list[SettingSpec]:
    """Every registered strategy's settings, in registration order; a name may occur once per strategy."""
    return [spec for strategy in STRATEGIES.values() for spec in strategy.specs]


def build_settings(name, values: dict):
    """The strategy's settings dataclass from `values` (its own settings by name; None means the default),
    validated against its own ranges. A name the strategy does not have is refused with the names it has."""
    strategy = get_strategy(name)
    specs = {spec.name: spec for spec in strategy.specs}
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise SettingError(f"unknown settings {unknown} for strategy {name!r}; its settings are {sorted(specs)}")
    return strategy.settings(**{key: specs[key].check(value) for key, value in values.items() if value is not None})
