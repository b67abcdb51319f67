"""Query · key: what is behind one head's attention weights at one query, the query vector, each key vector, their
elementwise product coloured by sign, the scores before the softmax and the weights after it (bertviz's neuron
view). Opened by clicking a row of the live heatmap, or chosen here; computed on demand by the session service
(analysis/query_key.py), never during a translation."""
from __future__ import annotations

import gradio as gr

from transformer.core.head_ref import head_label, layer_label
from transformer.core.probes import PROBES
from transformer.numbers import ascii_digits

from ..figures.query_key import query_key_figure
from ..text import literal, page_error
from .base import MODEL, TRANSLATION, View, current_translation, translated

KINDS = [(PROBES[kind].title.split(" (")[0], kind) for kind in ("encoder_self", "decoder_self", "cross")]
PROMPT = "Choose a query and press the button, or click a row of the live heatmap (one head, pieces)."


class QueryKeyView(View):
    name, title = "query_key", "Query · key"
    controls = ("qk_kind", "qk_query")
    reads = ("sentence",)

    def build(self, context):
        with gr.Row():
            kind = gr.Radio(KINDS, value="cross", label="Attention", elem_id="qk-kind")
            query = gr.Dropdown([], label="Query token", elem_id="qk-query")
            go = gr.Button("Break down this head's weights", elem_id="qk-button", scale=0)
        text = gr.Markdown(PROMPT, elem_id="qk-text")
        plot = gr.Plot(label="Query, keys, products, scores and weights", elem_id="qk-plot")
        clicked = gr.State((0, 0))  # (layer, head) of the live heatmap's clicked row
        return {"qk_kind": kind, "qk_query": query, "qk_button": go, "qk_text": text, "qk_plot": plot,
                "qk_layer_head": clicked}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        if changed in (TRANSLATION, "sentence", "qk_kind"):
            return {"qk_query": gr.update(choices=query_choices(translation, state.get("qk_kind") or "cross"), value=0),
                    "qk_text": PROMPT, "qk_plot": None}
        return {}

    def show(self, ui, result, sentence, kind: str, layer: int, head: int, query: int) -> dict:
        translation = translated(result, {"sentence": sentence})
        try:
            breakdown = ui.service.query_key(result, translation, kind, layer, head, query)
        except ValueError as error:
            raise page_error(str(error)) from error
        recorded = translation.recorded[kind]
        keys = recorded.cols[: len(breakdown.weights)]
        where = f"{layer_label(layer)}, {head_label(head)}"
        text = (
            f"**{literal(dict((v, k) for k, v in KINDS)[kind])}, {where}, query “{literal(recorded.rows[query])}”.** "
            f"Each row's products sum to its score times √{breakdown.query_vector.size}; the softmax of the scores "
            f"is the weight row the heatmap draws (largest: “{literal(keys[int(breakdown.weights.argmax())])}”, "
            f"{breakdown.weights.max():.1%}). Blue: the two vectors agree in that dimension, red: they disagree."
        )
        figure = query_key_figure(
            breakdown, recorded.rows[query], keys, f"{kind}: {where}, query {recorded.rows[query]}"
        )
        return {"qk_text": text, "qk_plot": figure}

    def wire(self, ui):
        c = ui.components

        def chosen(result, sentence, kind, layer, head, query):
            layer_index = int(layer) if ascii_digits(str(layer)) else 0
            head_index = int(head) if ascii_digits(str(head)) else 0  # the mean or all heads: head 1
            return ui.by_component(self.show(ui, result, sentence, kind, layer_index, head_index, int(query or 0)))

        c["qk_button"].click(
            chosen,
            [ui.result_state, c["sentence"], c["qk_kind"], c["layer"], c["head"], c["qk_query"]],
            [c["qk_text"], c["qk_plot"]],
            api_visibility="private",
        )
        if "live_attention" not in c:
            return

        def clicked(result, sentence, evt: gr.EventData):  # a row of the live heatmap: its kind, layer, head, query
            # first the tab, the kind and the query; the figure follows (a plot sent to a tab in the same response
            # that opens it is not drawn)
            kind, query = evt.kind, int(evt.query)
            translation = translated(result, {"sentence": sentence})
            result.rendered_views.add(self.name)  # drawn here: opening the tab must not draw it over again
            return {ui.result_state: result, c["tabs"]: gr.Tabs(selected=self.name), c["qk_kind"]: kind,
                    c["qk_text"]: "Computing…",
                    c["qk_query"]: gr.update(choices=query_choices(translation, kind), value=query),
                    c["qk_layer_head"]: (int(evt.layer), int(evt.head))}

        def drawn(result, sentence, kind, query, layer_head):
            layer, head = layer_head
            return ui.by_component(self.show(ui, result, sentence, kind, layer, head, int(query)))

        c["live_attention"].select(clicked, [ui.result_state, c["sentence"]], [ui.result_state] + [
                                   c[name] for name in ("tabs", "qk_kind", "qk_text", "qk_query", "qk_layer_head")],
                                   api_visibility="private").success(  # not after a message: nothing chosen
            drawn, [ui.result_state, c["sentence"], c["qk_kind"], c["qk_query"], c["qk_layer_head"]],
            [c["qk_text"], c["qk_plot"]], api_visibility="private")


def query_choices(translation, kind: str) -> list[tuple[str, int]]:
    return [(f"{index + 1}: {token}", index) for index, token in enumerate(translation.recorded[kind].rows)]
