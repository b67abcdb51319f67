"""Atlas: what every head does across a corpus, and which corpus tokens a token of this translation resembles
(transformer/atlas/). The model's atlas is read on the first press of a button here, never at start-up; a model
without one says how to build it.

The matrix shows every head of one attention kind as a small map of its corpus queries and keys (AttentionViz); the
head chosen above opens at full size, coloured by query/key, position or a searched piece, with this sentence's own
queries and keys placed on it. "Nearest corpus tokens" lists the 10 corpus tokens whose residual vector after the
chosen layer is nearest to the chosen token's; "Open this sentence" translates one of them in the other views.

Each kind's matrix has its own stack's layers x heads (store.py): the shared layer and head controls offer the widest
stack's, so a choice beyond the shown kind's or side's stack opens its last (`fitted`), as selection.fit does for
the live views."""
from __future__ import annotations

from contextlib import contextmanager

import gradio as gr

from transformer.atlas.query import head_points, neighbours, placed, similar_heads
from transformer.atlas.store import AtlasError
from transformer.core.head_ref import head_label, layer_label, shown
from transformer.core.probes import ATTENTION_KINDS, PROBES
from transformer.numbers import ascii_digits

from ..atlas_service import one_sentence, sentence_vectors, served_atlas
from ..figures.atlas import COLOURINGS, head_figure, matrix_figure
from ..text import literal, page_error
from .base import LATEST, MODEL, TRANSLATION, View, current_translation, translated

KINDS = [(PROBES[kind].title.split(" (")[0], kind) for kind in ("encoder_self", "decoder_self", "cross")]
SIDES = [("Source token", "source"), ("Translation token", "target")]
PROMPT = ("Press **Draw the maps** for every head's map over the model's corpus atlas (read on first use), then "
          "**Nearest corpus tokens** for the corpus tokens most like a token of this sentence.")
OPEN_TRANSLATE_JS = "() => { document.querySelector('#translate-button').click(); }"


def chosen_index(value, default: int = 0) -> int:
    """The shared layer or head control's value as a 0-based index (the overview, mean or all: the default)."""
    return int(value) if ascii_digits(str(value)) else default


def fitted(atlas, name: str, what: str, value, default: int) -> tuple[int, str]:
    """The shared control's layer or head (`what`) within the stack of kind or side `name`: the controls offer the
    widest stack's (selection.py), so a choice beyond a shallower stack becomes its last, and the note says so; one
    beyond every stack (no control offers it) is refused, naming the range."""
    index = chosen_index(value, default)
    count = getattr(atlas.stack(name), what)
    widest = max(getattr(atlas.stack(kind), what) for kind in ATTENTION_KINDS)
    if not 0 <= index < widest:
        raise page_error(f"{what[:-1]} must be in [1, {widest}], got {shown(index)}")
    if index < count:
        return index, ""
    label = layer_label if what == "layers" else head_label
    return count - 1, f"{label(index).capitalize()} is beyond this stack{atlas.stack_text(name)}: its last is shown. "


class AtlasView(View):
    name, title = "atlas", "Atlas"
    controls = ("atlas_kind", "atlas_colouring", "atlas_search", "atlas_side", "atlas_token")
    reads = ("sentence",)

    def build(self, context):
        text = gr.Markdown(PROMPT, elem_id="atlas-text")
        with gr.Row():
            kind = gr.Radio(KINDS, value="cross", label="Attention", elem_id="atlas-kind")
            colouring = gr.Radio(list(COLOURINGS), value=COLOURINGS[0], label="Colour", elem_id="atlas-colouring")
            search = gr.Textbox(label="Piece to highlight", max_lines=1, elem_id="atlas-search")
            draw = gr.Button("Draw the maps", elem_id="atlas-draw", scale=0)
        head = gr.Plot(label="The chosen head's map", elem_id="atlas-head")
        matrix = gr.Plot(label="Every head", elem_id="atlas-matrix")
        with gr.Row():
            side = gr.Radio(SIDES, value="source", label="Token of", elem_id="atlas-side")
            ask = gr.Button("Nearest corpus tokens", elem_id="atlas-ask", scale=0)
        # the sentence's tokens as chips: a click lists that token's nearest corpus tokens
        token = gr.Radio([], label="This sentence's tokens: click one for its nearest corpus tokens",
                         elem_id="atlas-token")
        found = gr.Radio([], label="Nearest corpus tokens (at the chosen layer)", elem_id="atlas-neighbours")
        open_sentence = gr.Button("Open this sentence", elem_id="atlas-open", size="sm")
        return {"atlas_text": text, "atlas_kind": kind, "atlas_colouring": colouring, "atlas_search": search,
                "atlas_draw": draw, "atlas_head": head, "atlas_matrix": matrix, "atlas_side": side,
                "atlas_token": token, "atlas_ask": ask, "atlas_neighbours": found, "atlas_open": open_sentence,
                "atlas_sentences": gr.State([])}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed == MODEL:
            return {}
        if changed in (TRANSLATION, "sentence", "atlas_side"):
            return {"atlas_token": gr.update(choices=token_choices(translation, state.get("atlas_side")), value=None)}
        return {}

    def maps(self, ui, result, state: dict, layer, head) -> dict:
        served, atlas = served_atlas(ui, result.model_key if result else None)
        kind = state.get("atlas_kind") or "cross"
        shape = atlas.stack(kind)  # the matrix: this kind's own layers x heads
        (layer, beyond_layer), (head, beyond_head) = (fitted(atlas, kind, "layers", layer, shape.layers - 1),
                                                      fitted(atlas, kind, "heads", head, 0))
        every = [[head_points(atlas, kind, lay, hd) for hd in range(shape.heads)] for lay in range(shape.layers)]
        points = every[layer][head]
        for part in ("queries", "keys"):
            column = atlas.sentences.column(points[part]["side"])
            points[part]["text"] = column.take(points[part]["sentence"]).to_pylist()
        on_screen, title = None, f"{dict((v, k) for k, v in KINDS)[kind]}, {layer_label(layer)}, {head_label(head)}"
        translation = current_translation(result, state)
        on_every = None
        if translation is not None:  # the sentence on every map of the kind: the open head's labelled
            vectors = sentence_vectors(served, translation.source)
            on_every = [[placed(atlas, vectors, kind, lay, hd) for hd in range(shape.heads)]
                        for lay in range(shape.layers)]
            on_screen = {part: {"coordinates": xy, "piece": vectors.pieces[points[part]["side"]]}
                         for part, xy in on_every[layer][head].items()}
        head_plot = head_figure(points, f"{title} ({points['projection']})", state.get("atlas_colouring")
                                or COLOURINGS[0], state.get("atlas_search") or "", on_screen)
        text = (beyond_layer + beyond_head + f"**{atlas.manifest['counts']['sentences']:,} corpus pairs** "
                f"({literal(atlas.manifest['corpus']['folder'])}); the maps hold a sample of "
                f"{len(points['queries']['piece']):,} queries and {len(points['keys']['piece']):,} keys per head. "
                "Blue: queries, orange: keys, moved to the queries' centre (the softmax is unchanged); stars: this "
                "sentence.")
        matrix = matrix_figure(every, "Every head, by layer (rows) and head", on_every)
        alike = similar_heads(atlas, kind, layer, head)[:5]
        text += ("\n\n**Similar heads** (share of each point's 10 nearest points that the two maps share): " +
                 ", ".join(f"{shown(other_layer)}.{shown(other_head)} ({overlap:.0%})"
                           for other_layer, other_head, overlap in alike))
        return {"atlas_text": text, "atlas_head": head_plot, "atlas_matrix": matrix}

    def neighbours(self, ui, result, state: dict, layer) -> dict:

        translation = translated(result, state, then=", then ask for a token's neighbours")
        served, atlas = served_atlas(ui, result.model_key)
        side = state.get("atlas_side") or "source"
        layer, _ = fitted(atlas, side, "layers", layer, atlas.stack(side).layers - 1)
        if not atlas.indexed[side]:
            raise page_error(f"This atlas indexes no layer of the {side} side: build one with --layers naming one of "
                             f"its {atlas.stack(side).layers}.")
        if layer not in atlas.indexed[side]:  # the label names the layer shown
            layer = atlas.indexed[side][-1]
        vectors = sentence_vectors(served, one_sentence(translation.source))
        token = min(int(state.get("atlas_token") or 0), len(vectors.pieces[side]) - 1)
        found = neighbours(atlas, vectors, token, layer, side, 10)
        choices = [(f"{n.distance:.2f}  “{n.piece}” (position {shown(n.position)}) in: {n.source}  →  {n.target}", i)
                   for i, n in enumerate(found)]
        return {"atlas_neighbours": gr.update(choices=choices, value=None,
                                              label=f"Nearest corpus tokens to “{vectors.pieces[side][token]}”, "
                                                    f"{layer_label(layer)}"),
                "atlas_sentences": [n.source for n in found]}

    def wire(self, ui):
        c = ui.components

        def drawn(result, layer, head, *values):
            with atlas_errors():
                return ui.by_component(self.maps(ui, result, dict(zip(self.controls, values)), layer, head))

        controls = [c[name] for name in self.controls]
        c["atlas_draw"].click(drawn, [ui.result_state, c["layer"], c["head"], *controls],
                              [c["atlas_text"], c["atlas_head"], c["atlas_matrix"]], api_visibility="private")

        def asked(result, sentence, layer, *values):
            state = {"sentence": sentence, **dict(zip(self.controls, values))}
            with atlas_errors():
                return ui.by_component(self.neighbours(ui, result, state, layer))

        for trigger in (c["atlas_ask"].click, c["atlas_token"].input):  # the button, or a click on a token
            trigger(asked, [ui.result_state, c["sentence"], c["layer"], *controls],
                    [c["atlas_neighbours"], c["atlas_sentences"]], api_visibility="private", **LATEST)

        def opened(sentences, chosen):
            if chosen is None or not 0 <= int(chosen) < len(sentences):
                raise page_error("Choose one of the nearest corpus tokens first.")
            return sentences[int(chosen)]

        c["atlas_open"].click(opened, [c["atlas_sentences"], c["atlas_neighbours"]], c["source"],
                              api_visibility="private").success(None, js=OPEN_TRANSLATE_JS)


@contextmanager
def atlas_errors():
    """An atlas that cannot answer (a file gone, the extra not installed) is one message, naming what to do."""
    try:
        yield
    except AtlasError as error:
        raise page_error(str(error)) from None


def token_choices(translation, side: str | None) -> list[tuple[str, int]]:
    tokens = translation.tgt_tokens if side == "target" else translation.src_tokens
    return [(f"{shown(index)}: {token}", index) for index, token in enumerate(tokens)]
