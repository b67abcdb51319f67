"""The one number rule: every numeric value a person or a program sends (an API argument, a link, a page control,
a command-line flag) is checked here for being a finite number of the right kind, in range, before anything
converts it. `int(float("nan"))` raises and `float("inf") < 8` is False, so a check after a conversion or a bare
comparison lets such values through.

A failure raises `NumberError`, whose message names the value's name, the allowed range (in the numbering of the
surface that passed `low` and `high`: the API and links count layers from 1) and the value as it was sent.
"""
from __future__ import annotations

import math


class NumberError(ValueError):
    """A value that is not a finite number of the right kind, or is out of range; the message says which."""


def allowed(kind: type | None, low, high) -> str:
    """"an integer in [1, 8]", "a number ≥ 0.05", "in [1, 8]" (kind None), ...: the range as messages write it."""
    noun = {int: "an integer", float: "a number", None: ""}[kind]
    if low is not None and high is not None:
        bound = f"in [{low}, {high}]"
    elif low is not None:
        bound = f"at least {low}"
    else:
        bound = "" if high is None else f"at most {high}"
    return " ".join(part for part in (noun, bound) if part)


def checked_number(name: str, value, kind: type = int, low=None, high=None, sent=None):
    """`value` as `kind` (int or float) when it is a finite number of that kind within [low, high] (None: no
    bound); else a NumberError naming `name`, the range and the value: as sent (`sent`, default `value`) when it
    is no number of that kind, as the number it is when it is only out of range."""
    shown = value if sent is None else sent
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not is_number or not math.isfinite(value) or (kind is int and value != int(value)):
        raise NumberError(f"{name} must be {allowed(kind, low, high)}, got {shown!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise NumberError(f"{name} must be {allowed(None, low, high)}, got {value!r}")  # a number, out of range
    return kind(value)


def ascii_digits(text) -> bool:
    """Whether `text` is a whole number written in ASCII digits only ("12"; not "", "-1", "١٢", "１２" or "²", which
    `str.isdigit` accepts and `int` then reads or refuses)."""
    return isinstance(text, str) and text.isascii() and text.isdigit()


def parsed_number(name: str, text, kind: type = int, low=None, high=None):
    """A number written as text (a link's value, a command-line flag), checked by `checked_number`: "NaN",
    "inf" and "1e999" are refused like "abc", and the message quotes the text as it was sent. Only ASCII is read:
    Python's `float` also takes other scripts' digits ("١٢", full-width "１２") and underscores ("1_000"), which a
    person reading the link or the command line would not take for that number."""
    if isinstance(text, str):
        try:
            if not text.isascii() or "_" in text:
                raise ValueError(text)
            value = float(text.strip())
        except ValueError:
            raise NumberError(f"{name} must be {allowed(kind, low, high)}, got {text!r}") from None
        if kind is int and math.isfinite(value) and value == int(value) and "." not in text and "e" not in text.lower():
            value = int(text.strip())  # exact for whole numbers beyond float's 2**53
    else:
        value = text
    return checked_number(name, value, kind, low, high, sent=text)
