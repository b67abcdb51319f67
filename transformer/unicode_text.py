"""The one Unicode rule: every text that reaches the tokenizer (an API field, a command-line argument, a package
call's `text`) is checked here first, by the name of the argument that carried it.

Text that no encoding can hold is a lone UTF-16 surrogate: a raw JSON call may send "\\ud800", and Python turns a
command-line byte that is not UTF-8 (0xFF) into "\\udcff" (PEP 383's surrogateescape). sentencepiece would fail on
either deep inside, with a message that names no argument.
"""
from __future__ import annotations


class TextError(ValueError):
    """A text argument that is not text, or not valid Unicode; `name` is the argument, which the message names."""

    def __init__(self, name: str, message: str):
        super().__init__(message)
        self.name = name


def unicode_problem(text: str) -> str | None:
    """Why `text` is not valid Unicode (its first lone surrogate, counted from 1), or None when it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        code = ord(text[error.start])
        where = f"character {error.start + 1} is a lone surrogate (U+{code:04X}), half of a character"
        if 0xDC80 <= code <= 0xDCFF:  # how Python keeps an undecodable byte of argv or a file name
            where += f" (or the byte 0x{code - 0xDC00:02X}, which is not UTF-8, read from a command line)"
        return where
    return None


def check_text(name: str, value, optional: bool = False) -> str | None:
    """`value` when it is a str holding valid Unicode (or None where `optional`); else a TextError naming `name`."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise TextError(name, f"{name} must be text (a str), got {type(value).__name__}")
    problem = unicode_problem(value)
    if problem:
        raise TextError(name, f"{name} is not valid Unicode text: {problem}")
    return value


MAX_CHARACTERS = 2000  # per request, on every surface: longer input is refused with a message


def checked_lines(name: str, text, most_lines: int, label: str | None = None) -> list[str]:
    """The non-empty lines of `text`, stripped: the one rule for a text to translate on every surface (the API's
    `text`, /patch's `clean`, a command line's `--clean`). Refused with a TextError naming `name` (or `label`,
    "Source text" on the page) when it is not valid Unicode, empty, longer than MAX_CHARACTERS or of more than
    `most_lines` lines."""
    label = name if label is None else label
    check_text(name, text)
    if not text.strip():
        raise TextError(name, f"{label} is empty: type a sentence to translate.")
    if len(text) > MAX_CHARACTERS:
        raise TextError(name, f"{label} has {len(text):,} characters; the limit is {MAX_CHARACTERS:,} per request.")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if len(lines) > most_lines:
        limit = "one sentence on one line" if most_lines == 1 else f"{most_lines} sentences per request"
        raise TextError(name, f"{label} has {len(lines)} lines; the limit is {limit}.")
    return lines
