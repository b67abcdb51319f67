"""Export: the current translation's tokens, steps, search tree and every attention weight as JSON and CSV, and its
live view as standalone HTML."""
from __future__ import annotations

import gradio as gr

from transformer.analysis.registry import cheap_analyses

from ..exports import export_files
from .base import TRANSLATION, View, translated


class ExportView(View):
    name, title = "export", "Export"

    def build(self, context):
        gr.Markdown("Tokens, decoding steps, the search tree, the logit lens and every attention weight of the current "
                    "translation, with the model, its weights' hash and the settings that produced it; the first "
                    "sentence's attention in the layout `bertviz` takes (see docs/views.md); and each sentence's whole "
                    "live view as one HTML file that opens offline, for a paper or a slide.")
        button = gr.Button("Export JSON, CSV, bertviz and HTML", elem_id="export-button")
        files = gr.File(label="Downloads", file_count="multiple", elem_id="export-files")
        return {"export_button": button, "export_files": files}

    def render(self, result, state, context, changed):
        return {"export_files": None} if changed == TRANSLATION else {}  # old files belong to the old result

    def wire(self, ui):
        def export(result):
            translated(result, {}, then=", then export it")
            # the export holds every cheap analysis, the tabs' included, computed now where not yet
            return export_files(ui.service.complete(result, cheap_analyses()), ui.registry)

        ui.components["export_button"].click(export, ui.result_state, ui.components["export_files"],
                                             api_visibility="private")
