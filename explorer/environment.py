"""The server's whole-number settings, read from the environment: each a count (0 included), checked the same way
and refused with one line that names the setting, what it counts and the value given."""
from __future__ import annotations

import os

from transformer.numbers import ascii_digits


def whole_number_setting(name: str, default: int, meaning: str, most: int | None = None) -> int:
    """`name`'s value, `default` when unset. `meaning` ends the message of a bad value: "must be <meaning>, got '…'".
    Only ASCII digits count: int() would also take '²', '٣' or ' +1'."""
    text = os.environ.get(name, str(default)).strip()
    if not (ascii_digits(text) and (most is None or int(text) <= most)):
        raise ValueError(f"{name} must be {meaning}, got {text!r}")
    return int(text)
