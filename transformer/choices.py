"""The one choice rule: an argument that names one of a fixed set (a model, an attention kind, a side, a strategy, a
device) is checked here for being a string before it is looked up, then for being one of the set. A raw JSON call may
send {} or [] where a name belongs; looked up as it is, that fails as `unhashable type`, naming no argument.

A failure raises `ChoiceError`, whose message names the argument, its choices and what was sent.
"""
from __future__ import annotations


class ChoiceError(ValueError):
    """A choice-like argument that is no string, or names none of its choices; `name` is the argument."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def type_phrase(value) -> str:
    """ "a dict", "an int", "None": what a value is, as a message says it."""
    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def checked_choice(name: str, value, choices, optional: bool = False, unknown: str | None = None) -> str | None:
    """`value` when it is a str among `choices` (any container of strings), or None where `optional`; else a
    ChoiceError naming `name`. `unknown` replaces the message for a string that is none of the choices."""
    listed = list(choices)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        also = " (or None)" if optional else ""
        raise ChoiceError(name, f"{name} must be a string naming one of {listed}{also}, got {type_phrase(value)}")
    if value not in listed:
        raise ChoiceError(name, unknown or f"{name} must be one of {listed}, got {value!r}")
    return value
