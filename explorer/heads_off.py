"""Heads switched off, as the page, the API and links write them: "kind layer head" entries numbered from 1
as the page numbers layers and heads, separated by ";" or ",", e.g. "cross 3 2; decoder_self 1 4"."""
from __future__ import annotations

import re

from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.strategies import SettingError


def parse_heads_off(text: str | None) -> list[tuple[str, int, int]] | None:
    """0-based (kind, layer, head) entries, or None for no text; a malformed entry is named."""
    if text is None or not str(text).strip():
        return None
    entries = []
    for entry in re.split(r"[;,]", str(text)):
        parts = entry.split()
        if not parts:
            continue
        if len(parts) != 3 or parts[0] not in ATTENTION_KINDS or not parts[1].isdigit() or not parts[2].isdigit():
            raise SettingError(f"heads_off entry {entry.strip()!r} must be 'kind layer head' with kind one of "
                               f"{list(ATTENTION_KINDS)} and layer and head numbered from 1, e.g. 'cross 3 2'")
        layer, head = int(parts[1]), int(parts[2])
        if layer < 1 or head < 1:
            raise SettingError(f"heads_off entry {entry.strip()!r}: layers and heads are numbered from 1")
        entries.append((parts[0], layer - 1, head - 1))
    return entries


def format_heads_off(entries) -> str:
    return "; ".join(f"{kind} {layer + 1} {head + 1}" for kind, layer, head in entries or [])
