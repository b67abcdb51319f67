"""Text on the page. A visitor's text, a link's value and a token's piece are data, never markup: every message,
label and legend that can contain them is built with the helpers here, and nowhere else.

- `literal` for Markdown (the summary, notes, legends): every character Markdown or HTML gives a meaning
  (`<`, `&`, `*`, `_`, brackets, `:` of a URL, ...) becomes an entity, so `</s>` stays `</s>`, `[x](y)` is no link
  and `https://...` is not made one.
- `plain` for HTML text.
- `page_error` / `page_warning` for Gradio's toasts, which render their message as HTML: the one way the app
  raises an error a visitor sees (tests/test_injection.py checks that no other module calls gr.Error).

And the example sentences offered for each source language.
"""
from __future__ import annotations

import html
import re
import string

import gradio as gr

from .assets import STATIC

# every ASCII punctuation character Markdown may read as syntax, as a numeric entity (shown as itself); comma,
# full stop, quotes and the like mean nothing alone and stay, so a summary read through the API stays legible
_MARKDOWN_ENTITIES = {ord(c): f"&#{ord(c)};" for c in string.punctuation if c not in ",.;?'\"/%$"}
_BARE_WWW = re.compile(r"(?i)(www)\.")  # GFM turns www.example.com into a link without any punctuation but "."


def literal(value) -> str:
    """`value` as text inside Markdown: shown exactly, never markup, never a link."""
    return _BARE_WWW.sub(r"\1&#46;", str(value).translate(_MARKDOWN_ENTITIES))


def plain(value) -> str:
    """`value` as text inside HTML."""
    return html.escape(str(value), quote=True)


def page_error(message: str) -> gr.Error:
    """The error a visitor sees (a toast, or the API's error message), its text shown as text: raise it."""
    return gr.Error(html.escape(str(message), quote=False))


def page_warning(message: str) -> None:
    """A warning toast whose text is shown as text."""
    gr.Warning(html.escape(str(message), quote=False))


def examples_for(language: str | None) -> list[str]:
    path = STATIC / f"examples.{language}.txt"
    if not path.is_file():
        path = STATIC / "examples.en.txt"
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def placeholder_for(language: str | None) -> str:
    """The source box's hint, in the model's source language: its first example sentence."""
    return f"One sentence per line, e.g. {examples_for(language)[0]}"
