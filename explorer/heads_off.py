"""Heads switched off, as the page, the API and links write them: "kind layer head" entries numbered from 1
as the page numbers layers and heads, separated by ";" or ",", e.g. "cross 3 2; decoder_self 1 4"."""
from __future__ import annotations

import re

from transformer.core.head_ref import HeadRef
from transformer.decoding.strategies import SettingError


def parse_heads_off(text: str | None) -> list[HeadRef] | None:
    """0-based head addresses, or None for no text; a malformed entry is named."""
    if text is None or not str(text).strip():
        return None
    try:
        return [HeadRef.parse(entry) for entry in re.split(r"[;,]", str(text)) if entry.strip()]
    except ValueError as error:
        raise SettingError(str(error)) from None


def format_heads_off(entries) -> str:
    return "; ".join(HeadRef(*entry).entry for entry in entries or [])
