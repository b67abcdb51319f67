"""Live attention: the translation's attention drawn in the browser, on the first screen. Kind, layer, head,
step, word merging, a heatmap or bertviz-style lines (heads as colours, hover a token to follow it) and the
layer x head overview all switch there, without asking the server (static/live_data.js, the data work;
static/live_render.js, the drawing, and live_export.js, its downloads)."""

from __future__ import annotations

import gradio as gr

from transformer.analysis.registered import ALTI_PLUS, NORMS

from ..assets import LIVE_CSS, LIVE_JS
from ..live_payload import live_payload
from .base import TRANSLATION, View, current_translation


class LiveView(View):
    name, title = "live", "Live attention"
    placement = "first_screen"
    reads = ("sentence",)
    analyses = (ALTI_PLUS, NORMS)  # the source-share strip, the ALTI+ kind and norm-based attention

    def build(self, context):
        return {"live_attention": gr.HTML(None, html_template='<div class="ae-live"></div>',
                                          css_template=LIVE_CSS,
                                          js_on_load=LIVE_JS,
                                          elem_id="live-attention", min_height=320)}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed not in (TRANSLATION, "sentence"):
            return {}
        return {"live_attention": live_payload(translation)}
