"""Visitor-supplied text inside Markdown: shown literally, never as markup."""
from __future__ import annotations

import html


def literal(value: str) -> str:
    return html.escape(value, quote=False).replace("*", "&#42;").replace("_", "&#95;").replace("`", "&#96;")
