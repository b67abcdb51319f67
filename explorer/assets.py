"""The static folder and the browser code and style sheets read from it, once: the page's views and the
self-contained files (standalone.py) inline the same text."""
from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"


def static_text(*names: str) -> str:
    """The named files of the static folder, joined in that order."""
    return "\n".join((STATIC / name).read_text(encoding="utf-8") for name in names)


PAGE_CSS = static_text("style.css", "data_table.css")
# repairs to Gradio's markup, and a text alternative for each plotly figure (docs/accessibility.md)
PAGE_HEAD = f"<script>{static_text('gradio_markup.js', 'figure_text.js')}</script>"
# the numbering for people and the data modules (pure functions, tested under node) first, then the drawing (the
# live view's downloads, and its keyboard and screen-reader parts, in files of their own)
LIVE_JS = static_text("head_ref.js", "live_data.js", "live_export.js", "live_access.js", "live_render.js")
LIVE_CSS = static_text("live_view.css", "data_table.css")
WALK_JS = static_text("head_ref.js", "walk_data.js", "walk_figures.js", "walk_render.js")
WALK_CSS = static_text("walk_view.css")
