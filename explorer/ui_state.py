"""The page as the events see it (`Wiring`): its components by name, the stored result and the view state, the
request its controls describe, and the views rendered into component updates.

Handlers return dicts keyed by component; views return dicts keyed by name (`Wiring.by_component` maps).
"""
from __future__ import annotations

import itertools
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable

import gradio as gr

from transformer.decoding.strategies import all_settings

from .api import run_request
from .api_json import summary
from .language_offer import offer_update
from .registry import Registry
from .request import Request
from .session import ModelService
from .views import MODEL, TRANSLATION, View, ViewContext
from .views.selection import head_choices, layer_choices, valid_head, valid_layer, widest

HANDED_OUT_KEPT = 256  # results the JSON route has handed to pages, kept for their tabs (the newest)
DRAWS = itertools.count(1)  # numbers the views' draws in the order they begin (Wiring.render_named)


TRANSLATE_SHARED_OUTPUTS = ("translation", "summary", "language_offer", "sentence", "layer", "head")  # and the views'


class Wiring:
    """Components by name, the result state, and the view state: what views use to wire their events."""

    def __init__(self, registry: Registry, views: list[View]):
        self.registry, self.views = registry, views
        self.service = ModelService(registry)  # the views' one way into the model
        self.components: dict[str, gr.components.Component] = {}
        self.view_outputs: dict[str, list[str]] = {}
        self.result_state: gr.State | None = None
        self.open_tab: gr.State | None = None  # the tab the visitor has open: drawn at once on Translate
        self.tabs: dict[str, gr.Tab] = {}
        self.state_names: list[str] = []
        self.demo: gr.Blocks | None = None  # the page, for a view's own page-load events (wiring.py sets it)
        self.training = None  # the playground's run queue (training_queue.TrainingQueue), made on first use
        self.startup_notes: list[str] = []  # what the server's start-up could not do, for the footer (app.py)
        # results the JSON route answered with (http_api.py), by the key it gave the page, which its tabs adopt
        self.handed_out: OrderedDict[str, object] = OrderedDict()
        self._handing = threading.Lock()

    def hand_out(self, result) -> str:
        """Keeps `result` for the page the JSON route answers, under a new key its tabs then adopt."""
        key = secrets.token_urlsafe(12)
        with self._handing:
            self.handed_out[key] = result
            while len(self.handed_out) > HANDED_OUT_KEPT:
                self.handed_out.popitem(last=False)
        return key

    def adopt(self, key):
        """The result handed out under `key`, or None where there is none (an unknown or forgotten key)."""
        if not isinstance(key, str):
            return None
        with self._handing:
            return self.handed_out.get(key)

    def add(self, named: dict, owner: str | None = None) -> None:
        clash = sorted(set(named) & set(self.components))
        if clash:
            raise ValueError(f"component names {clash} are used twice; view {owner!r} must choose others")
        self.components.update(named)
        if owner:  # a view's buttons start its own events; everything else may be rendered
            self.view_outputs[owner] = [name for name, c in named.items() if not isinstance(c, gr.Button)]

    @property
    def state_inputs(self) -> list:
        """[result state, every view-state control]: the inputs of every re-rendering handler."""
        return [self.result_state] + [self.components[name] for name in self.state_names]

    def state_from(self, values) -> dict:
        return dict(zip(self.state_names, values))

    @property
    def quiet(self) -> dict:
        """An event's arguments for no progress animation, with its loading status kept on the footer alone. Gradio's
        page re-reads (snapshots) the value of every component that has ever had a loading status at each status
        change of any event; an event listing ~100 outputs, as the page's load does, made each later Translate spend
        tens of milliseconds in the browser copying plots it was not changing."""
        return {"show_progress": "hidden", "show_progress_on": [self.components["footer"]]}

    def by_component(self, named: dict) -> dict:
        return {self.components[name]: value for name, value in named.items()}

    def outputs_of(self, view: View) -> list:
        return [self.components[name] for name in self.view_outputs[view.name]]

    def context(self, model_key: str) -> ViewContext:
        return ViewContext(model_key, {key: m.profile for key, m in self.registry.models.items()}, self.registry)

    @property
    def request_names(self) -> list[str]:
        """The page's request controls by component name (Request.from_page reads them): every strategy's
        settings are there, each under its namespaced key."""
        return (["source", "model", "device", "strategy"] + [s.key for s in all_settings()]
                + ["max_length", "prefix", "heads_off", "source_lang", "target_lang"])

    @property
    def translate_output_names(self) -> list[str]:
        """What a translation updates after the (hidden) result state: the shared outputs, then every view's."""
        return list(TRANSLATE_SHARED_OUTPUTS) + [
            name for view in self.views for name in self.view_outputs[view.name]]

    def translate(self, request: Request | Callable[[], Request], only: set[str] | None = None, **state) -> dict:
        """Runs a request (or builds it first: a bad value then becomes the visitor's message) and renders every
        view (or those named in `only`) in the view state given by name; what is not given takes its control's
        default. Returns values by name, with the stored result under "result"."""
        unknown = sorted(set(state) - set(self.state_names))
        if unknown:
            raise TypeError(f"unknown view state {unknown}; the view state is {self.state_names}")
        drawn = [view for view in self.views if only is None or view.name in only]
        result = run_request(self.service, request if callable(request) else lambda: request,
                             self.analyses_of(drawn))
        state = self.fitted_state(result, self.default_state() | state)
        named = {"result": result, **self.shared_updates(result, state)}
        for view in drawn:
            named.update(view.render(result, state, self.context(result.model_key), TRANSLATION))
            result.rendered_views.add(view.name)
        return named

    @staticmethod
    def fitted_state(result, state: dict) -> dict:
        """The view state a new result opens in: its first sentence, and the layer and head chosen where the
        result's widest stack has them (else its last layer, the mean of its heads)."""
        n_layers, n_heads = widest(result.translations[0].recorded)
        return state | {"sentence": 0, "layer": valid_layer(state["layer"], n_layers),
                        "head": valid_head(state["head"], n_heads)}

    @staticmethod
    def shared_updates(result, state: dict) -> dict:
        """What a new result updates besides the views, by name (TRANSLATE_SHARED_OUTPUTS), in the view state
        `fitted_state` gave: the translation, its summary, the language offer, and the sentence, layer and head
        pickers."""
        n_layers, n_heads = widest(result.translations[0].recorded)
        return {
            "translation": "\n".join(t.text for t in result.translations), "summary": summary(result),
            "language_offer": offer_update(result),
            "sentence": gr.update(choices=[(f"{i + 1}: {t.text[:60] or '(empty)'}", i)
                                           for i, t in enumerate(result.translations)], value=0),
            "layer": gr.update(choices=layer_choices(n_layers), value=state["layer"]),
            "head": gr.update(choices=head_choices(n_heads), value=state["head"]),
        }

    @property
    def first_screen(self) -> set[str]:
        """The views beside the input, drawn with every translation."""
        return {view.name for view in self.views if view.placement == "first_screen"}

    @staticmethod
    def analyses_of(views) -> frozenset[str]:
        """What the views read from a translation (View.analyses): all a translation computes for them."""
        return frozenset(name for view in views for name in view.analyses)

    def prepared(self, views, result):
        """`result` with the analyses the views read added where it lacks them (ModelService.complete): a tab's are
        computed when it is first drawn, never with the translation."""
        return self.service.complete(result, self.analyses_of(views))

    def default_state(self) -> dict:
        return {name: self.components[name].value for name in self.state_names}

    def view(self, name: str) -> View:
        return next(v for v in self.views if v.name == name)

    def drawn_now(self, result, view) -> None:
        """`view` is drawn by an answer that opens its tab (a jump, wiring.wire_jump): the tab's opening, which that
        answer sets off in the browser, has nothing left to draw, and a draw of it that began earlier is dropped when
        it ends (render_named), either of which would put the view back without what the jump drew."""
        if result is not None:
            result.rendered_views.add(view.name)
            result.draws[view.name] = next(DRAWS)

    def render_named(self, views, result, state: dict, model_key: str, changed: str) -> dict:
        """The views' updates by output name. A view's part is left out where a later draw of the same view began
        while this one ran: a page's events run side by side (a tab's opening waits in the queue, a control's redraw
        does not), and the draw that began last read the newest controls, so an older one ending later would put
        back what the visitor had just changed."""
        begun = {view.name: next(DRAWS) for view in views}
        if result is not None:
            result.draws.update(begun)
        if changed != MODEL:  # a model chosen re-labels the views; their translation-dependent parts wait for it
            result = self.prepared(views, result)
        named = {}
        for view in views:
            drawn = view.render(result, state, self.context(model_key), changed)
            if result is None or result.draws.get(view.name) == begun[view.name]:
                named.update(drawn)
        return named

    def render(self, views, result, state: dict, model_key: str, changed: str, listed=None) -> dict:
        """The views' updates by component, for an event whose outputs are the views' (`outputs_of`), or those of
        `listed` where it draws only some of them."""
        updates = self.by_component(self.render_named(views, result, state, model_key, changed))
        # Gradio reads an empty dict as one output value: say "nothing changes" with one of the event's own outputs
        # (a component outside them is refused: "Returned component ... not specified as output of function")
        return updates or {self.outputs_of((listed or views)[0])[0]: gr.update()}
