"""A view is one tab of the explorer, as a plug-in: it builds its own components, says which controls
it reads, and renders from (result, view state) to values keyed by component name. The shell
(explorer/shell.py) lays the views out as tabs, the wiring (explorer/wiring.py) connects every control to
the views that read it, and neither needs to know what a view draws. What a view needs from the model after
the translation it asks the session service for (`ui.service`, explorer/session.py). Adding a view is one file
plus one line in views/__init__.py.

Rendering never runs the model: what a view needs from the model itself is in the model's profile
(explorer/profile.py), computed once when the model loads; only a view's own buttons ask the service. The one
exception is Features (views/features.py), which reads the sentence at a dictionary's point as it draws (one pass,
10-20 ms) through the context's registry.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from ..text import page_error

# why a view is asked to render, besides the name of the control that changed
TRANSLATION = "translation"  # a new result (the shared controls are already valid for it)
MODEL = "model"  # the chosen model changed (or the page loaded); `result` may be from another model

SHARED_CONTROLS = ("sentence", "layer", "head")  # built by the shell, above the tabs
# A control's event while its last one still runs: Gradio's page skips it by default for `.input` ("once": the
# dispatch is dropped while a submission of the same event is pending), which could leave a picture at the first of
# two quick changes; "always_last" runs the latest once the running one ends, as `.change` does by default. Every
# `.input` of the page takes it (tests/test_first_screen.py checks).
LATEST = {"trigger_mode": "always_last"}


@dataclass
class ViewContext:
    model_key: str  # the model chosen in the page now
    profiles: dict  # model key -> ModelProfile
    # the page's served models (explorer/registry.py), for the one view that reads its model as it draws (Features:
    # a sentence through a dictionary, 10-20 ms); None where a view is drawn without a page
    registry: Any = None

    @property
    def profile(self):
        return self.profiles[self.model_key]


class View:
    name: str = ""  # the tab's id; also a prefix for this view's elem_ids
    title: str = ""
    placement: str = "tab"  # "tab": a tab of its own; "first_screen": beside the input, seen without scrolling
    controls: tuple[str, ...] = ()  # this view's own components whose values are part of the view state
    reads: tuple[str, ...] = ()  # shared controls whose changes re-render this view
    # the analyses (transformer/analysis/registered.py) this view reads from a translation: the page computes a
    # first-screen view's with the translation and a tab's when the tab is first drawn (ModelService.complete)
    analyses: tuple[str, ...] = ()
    # jumps this view offers: its button's component name -> the view it opens at the current decoding step
    # (the shell wires each to that view's `at_step`; a jump to a view that is not served is left out)
    jumps: dict[str, str] = {}

    def build(self, context: ViewContext) -> dict[str, Any]:
        """Creates the view's components (inside its tab, in a Blocks context) and returns them by name.
        Names are global: they address the outputs in handlers and tests."""
        raise NotImplementedError

    def render(self, result, state: dict, context: ViewContext, changed: str) -> dict[str, Any]:
        """Values (or gr.update) for this view's components, by name; only what `changed` affects."""
        raise NotImplementedError

    def at_step(self, ui, result, state: dict, step: int) -> dict[str, Any] | None:
        """This view opened at decoding step `step` (1-based) of the current sentence, as values by name; None
        when it has no such reading. Raising gr.Error tells the visitor why it cannot."""
        return None

    def wire(self, ui) -> None:
        """Events beyond re-rendering (a button that plays or exports); `ui` is the shell's `Wiring`."""


def current_translation(result, state: dict):
    """The translation the shared sentence control points at, or None before the first translation."""
    if result is None:
        return None
    sentence = int(state.get("sentence") or 0)
    return result.translations[min(max(sentence, 0), len(result.translations) - 1)]


TRANSLATE_FIRST = "Translate a sentence first."


def translated(result, state: dict, then: str = ""):
    """`current_translation` for an action that needs one: before the first translation, the visitor's message
    "Translate a sentence first." (with what to do `then`, e.g. ", then export it")."""
    translation = current_translation(result, state)
    if translation is None:
        raise page_error(TRANSLATE_FIRST[:-1] + then + ".")
    return translation


def plot_row(**plots: tuple[str, str]) -> dict:
    """Plots side by side, by component name: name=(label, elem_id)."""
    with gr.Row():
        return {name: gr.Plot(label=label, elem_id=elem_id) for name, (label, elem_id) in plots.items()}
