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

    def check(self, value):
        """The value as `kind`, or a SettingError naming the setting and its range."""
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not is_number or (self.kind is int and value != int(value)):
            noun = "an integer" if self.kind is int else "a number"
            raise SettingError(f"{self.name} must be {noun} in [{self.minimum}, {self.maximum}], got {value!r}")
        if not self.minimum <= value <= self.maximum:
            raise SettingError(f"{self.name} must be in [{self.minimum}, {self.maximum}], got {value!r}")
        return self.kind(value)


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
    taken = {spec.name: spec.strategy for s in STRATEGIES.values() if s.name != strategy.name for spec in s.specs}
    clashes = [spec.name for spec in strategy.specs if spec.name in taken]
    if clashes:
        raise ValueError(f"strategy {strategy.name!r}: settings {clashes} already belong to another strategy")
    STRATEGIES[strategy.name] = strategy
    return strategy


def unregister(name: str) -> None:
    STRATEGIES.pop(name, None)


def get_strategy(name) -> Strategy:
    if name not in STRATEGIES:
        raise SettingError(f"strategy must be one of {list(STRATEGIES)}, got {name!r}")
    return STRATEGIES[name]


def all_settings() -> list[SettingSpec]:
    """Every registered strategy's settings, in registration order (the API's argument order)."""
    return [spec for strategy in STRATEGIES.values() for spec in strategy.specs]


def build_settings(name, values: dict):
    """The strategy's settings dataclass from `values`, validated. Settings of other registered strategies
    are checked too but otherwise ignored, so a caller can pass every control's value whatever the strategy."""
    strategy = get_strategy(name)
    specs = {spec.name: spec for spec in all_settings()}
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise SettingError(f"unknown decoding settings {unknown}; known settings are {sorted(specs)}")
    checked = {key: specs[key].check(value) for key, value in values.items() if value is not None}
    return strategy.settings(**{spec.name: checked[spec.name] for spec in strategy.specs if spec.name in checked})
