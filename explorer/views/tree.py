"""Search tree: every expansion the search made, the winning path highlighted (for greedy decoding and
sampling a single path with each step's other candidates as leaves). Clicking a node shows that step as
the step view does, for that hypothesis: the candidates it weighed and its cross-attention."""
from __future__ import annotations

import math

import gradio as gr

from transformer.core.head_ref import from_shown, head_label, layer_label, shown

from .. import figures
from ..figures.tree import tree_svg
from ..text import literal, page_error
from .base import TRANSLATION, View, current_translation, plot_row, translated
from .selection import MEAN, select_heads, single_layer_and_head

CLICK_TO_SELECT = """
element.addEventListener('click', (event) => {
  const node = event.target.closest('[data-node]');
  if (node) trigger('click', {node: Number(node.dataset.node)});
});
// each node is a button: Enter or Space selects the focused one, as a click does
element.addEventListener('keydown', (event) => {
  const node = event.target.closest('[data-node]');
  if (node && (event.key === 'Enter' || event.key === ' ')) {
    event.preventDefault();
    trigger('click', {node: Number(node.dataset.node)});
  }
});
"""
PROMPT = "Click a node of the tree to see the step that produced it."


class TreeView(View):
    name, title = "tree", "Search tree"
    reads = ("sentence",)

    def build(self, context):
        tree = gr.HTML("", js_on_load=CLICK_TO_SELECT, elem_id="search-tree")
        text = gr.Markdown(PROMPT, elem_id="node-text")
        plots = plot_row(node_candidates=("Candidates at this node's step", "node-candidates"),
                         node_source=("Where that step looked in the source", "node-source"))
        return {"search_tree": tree, "node_text": text, **plots}

    def render(self, result, state, context, changed):
        translation = current_translation(result, state)
        if translation is None or changed not in (TRANSLATION, "sentence"):
            return {}
        return {"search_tree": tree_svg(translation.tree), "node_text": PROMPT, "node_candidates": None,
                "node_source": None}

    def node_panel(self, ui, result, state, node_id: int) -> dict:
        """The tree with `node_id` selected, and that node's step (one teacher-forced pass over its prefix)."""
        translation = current_translation(result, state)
        tree = translation.tree
        if not 0 <= node_id < len(tree.nodes):
            raise page_error(f"node must be in [0, {len(tree.nodes) - 1}], got {node_id}")
        path = tree.path_to(node_id)
        node, prefix = tree.nodes[node_id], [tree.nodes[i].token_id for i in path[:-1]]
        step = ui.service.step_after(result, translation, prefix)
        layer, head = single_layer_and_head(state["layer"], state["head"], step.cross.shape[:2])
        weights = select_heads(step.cross[:, :, None, :], layer, head)[0]
        hypothesis = " ".join(literal(tree.nodes[i].token) for i in path)
        which = "mean over heads" if head == MEAN else head_label(int(head))
        return {
            "search_tree": tree_svg(tree, selected=node_id),
            "node_text": (
                f"**Step {shown(node.depth)}, {node.status}{' (winning path)' if node_id in tree.winner else ''}.** "
                f"Hypothesis: {hypothesis}  \nThis token: probability {math.exp(node.log_prob):.1%}, "
                f"cumulative log-probability {node.score:.3f}, length-normalised {node.normalized_score:.3f}."
            ),
            "node_candidates": figures.candidates_bar(
                step.topk, node.token, f"Step {shown(node.depth)}: what this hypothesis weighed next"
            ),
            "node_source": figures.source_attention_bar(
                weights,
                translation.src_tokens,
                f"Step {shown(node.depth)}: cross-attention ({layer_label(layer)}, {which})",
            ),
        }

    def wire(self, ui):
        c = ui.components
        outputs = [c[name] for name in ("search_tree", "node_text", "node_candidates", "node_source")]

        def on_click(result, sentence, layer, head, evt: gr.EventData):
            translated(result, {"sentence": sentence})
            node = getattr(evt, "node", None)
            if not isinstance(node, int):
                raise page_error(f"node must be a whole number, got {node!r}")
            state = {"sentence": sentence, "layer": layer, "head": head}
            return ui.by_component(self.node_panel(ui, result, state, node))

        inputs = [ui.result_state, c["sentence"], c["layer"], c["head"]]
        c["search_tree"].click(on_click, inputs, outputs, api_visibility="private")

    def at_step(self, ui, result, state, step):
        """The step's node in the tree, selected, with its panel: the step view's jump lands here."""
        translation = translated(result, state)
        step = max(1, min(step, len(translation.steps)))
        return self.node_panel(ui, result, state, translation.steps[from_shown(step)].node)
