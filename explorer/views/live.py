"""Live attention: the translation's attention drawn in the browser, on the first screen. Kind, layer, head,
step, word merging, a heatmap or bertviz-style lines (heads as colours, hover a token to follow it) and the
layer x head overview all switch there, without asking the server (static/live_data.js, the data work;
static/live_render.js, the drawing)."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from .base import TRANSLATION, View, current_translation
from .live_payload import live_payload

STATIC = Path(__file__).resolve().parent.parent / "static"
# the data module (pure functions, tested under node) first, then the drawing that uses them
LIVE_JS = "\n".join((STATIC / name).read_text(encoding="utf-8") for name in ("live_data.js", "live_render.js"))


class LiveView(View):
    name, title = "live", "Live attention"
    placement = "first_screen"
    reads = ("sentence",)

    def build(self, context):
        return {"live_attention": gr.HTML(None, html_template='<div class="ae-live"></div>',
                                          css_template=(STATIC / "live_view.css").read_text(encoding="utf-8"),
                                          js_on_load=LIVE_JS,
                                          elem_id="live-attention", min_height=320)}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed not in (TRANSLATION, "sentence"):
            return {}
        return {"live_attention": live_payload(translation)}
