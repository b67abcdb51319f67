"""Live attention: the translation's attention drawn in the browser, on the first screen. Kind, layer, head,
step, word merging, a heatmap or bertviz-style lines (heads as colours, hover a token to follow it) and the
layer x head overview all switch there, without asking the server (static/live_view.js)."""
from __future__ import annotations

from pathlib import Path

import gradio as gr

from .base import TRANSLATION, View, current_translation
from .live_payload import live_payload

STATIC = Path(__file__).resolve().parent.parent / "static"


class LiveView(View):
    name, title = "live", "Live attention"
    placement = "first_screen"
    reads = ("sentence",)

    def build(self, context):
        return {"live_attention": gr.HTML(None, html_template='<div class="ae-live"></div>',
                                          css_template=(STATIC / "live_view.css").read_text(encoding="utf-8"),
                                          js_on_load=(STATIC / "live_view.js").read_text(encoding="utf-8"),
                                          elem_id="live-attention", min_height=320)}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed not in (TRANSLATION, "sentence"):
            return {}
        return {"live_attention": live_payload(translation)}
