"""Text on the page: visitor-supplied text inside Markdown, shown literally, never as markup; and the example
sentences offered for each source language."""
from __future__ import annotations

import html
from pathlib import Path


def literal(value: str) -> str:
    return html.escape(value, quote=False).replace("*", "&#42;").replace("_", "&#95;").replace("`", "&#96;")


STATIC = Path(__file__).resolve().parent / "static"


def examples_for(language: str | None) -> list[str]:
    path = STATIC / f"examples.{language}.txt"
    if not path.is_file():
        path = STATIC / "examples.en.txt"
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
