"""Every event the page registers, run through Gradio's own server path (preprocess, the function, postprocess) the
way a visitor's browser would call it: before any translation and after one, with each input's value as the page
holds it, and with a Radio's or Dropdown's choices picked one at a time. An event answers with values for its own
outputs or with a message to the visitor (gr.Error); anything else Gradio would raise on the server is a broken
click ("Returned component <Markdown> not specified as output of function" was one: the Atlas tab's token chips)."""
import asyncio
import copy
import warnings

import gradio as gr
import pytest
from gradio.events import EventData
from gradio.queueing import create_validator_fn
from gradio.state_holder import SessionState

from explorer.http_api import FIRST_SCREEN
from explorer.live_payload import live_payload
from explorer.registry import discover
from explorer.request import Request
from explorer.views import learn, steps

from .conftest import ROOT

pytestmark = pytest.mark.slow  # the shipped models and their atlas: every view has something to draw
SENTENCE = "A man in a blue jacket is riding a bicycle."
CHOICES_TRIED = 3  # per Radio or Dropdown input: its first, second and last choice
# What the page's own scripts send with events that carry data (gr.EventData), by component name and event: a row
# of the live heatmap (static/live_render.js), a node of the search tree (views/tree.py's template)
EVENT_DATA = {("live_attention", "select"): {"kind": "cross", "layer": 0, "head": 0, "query": 0},
              ("search_tree", "click"): {"node": 0}}


@pytest.fixture(scope="module")
def page():
    """(demo, ui, component names by id), with the step view's Play at full speed (no pause between frames) and the
    Learn tab's Train stopped by its time cap after its first update (a run trains in a process of its own)."""
    from explorer.shell import build_demo

    demo, ui = build_demo(discover(ROOT / "checkpoints"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(steps, "PLAY_DELAY_S", 0)
        patch.setattr(learn, "APP_TIME_CAP", 0.1)
        yield demo, ui, {component._id: name for name, component in ui.components.items()}


def names(page, fn) -> str:
    """An event as a person finds it in the code: its trigger (component name and event; the event it follows for a
    chained one) and its function."""
    demo, _, named = page
    if fn.trigger_after is not None:
        return f"{names(page, demo.fns[fn.trigger_after])} .{fn.targets[0][1]} -> {fn.name}"
    triggers = [f"{named.get(block_id, type(demo.blocks.get(block_id)).__name__)}.{event}"
                for block_id, event in fn.targets]
    return f"{' + '.join(triggers) or 'api'} -> {fn.name}"


class Visitor:
    """One visitor's page as the server sees it (Gradio's SessionState: stored states, components an update replaced,
    with their choices) and as the browser holds it (`values`: what it sends for each component, as the front end
    applies an event's answer: a value, or an update's value when it carries one)."""

    def __init__(self, demo, state: SessionState | None = None, values: dict | None = None):
        self.demo, self.state = demo, state or SessionState(demo)
        # the components' configurations, as a page load reads them (the app's lazy sessions, explorer/
        # gradio_sessions.py, make them only when read: a test run after the app's import has the patch)
        list(self.state.components)
        self.values = values if values is not None else {
            key: config.get("props", {}).get("value") for key, config in self.state.config_values.items()}

    def fork(self) -> "Visitor":
        """The same visitor at the same moment, for one event: what an event replaces is copied (a component's
        entry, the stored states, the values), never deeper."""
        state = copy.copy(self.state)  # not SessionState(demo), which rebuilds every component's config
        state.blocks_config = copy.copy(self.state.blocks_config)
        state.blocks_config.blocks = dict(self.state.blocks_config.blocks)
        state.config_values = {key: {**config, "props": dict(config.get("props", {}))}
                               for key, config in self.state.config_values.items()}
        state.state_data, state._state_ttl = copy.deepcopy(self.state.state_data), dict(self.state._state_ttl)
        return Visitor(self.demo, state, dict(self.values))

    def inputs(self, fn) -> list:
        return [None if block.stateful else self.values.get(block._id) for block in fn.inputs]

    def choices(self, block) -> list:
        """A Radio's or Dropdown's choices as the page offers them now (an update may have replaced them): the
        first CHOICES_TRIED - 1 and the last."""
        values = [value for _, value in getattr(self.state[block._id], "choices", None) or []]
        return values[:CHOICES_TRIED - 1] + values[-1:] if len(values) >= CHOICES_TRIED else values

    async def call(self, fn, inputs: list, event_data=None) -> None:
        """The event as the server runs it (Gradio's process_api; a generator iterated to its end), its answer
        applied to the page."""
        output = await self.demo.process_api(fn, inputs, state=self.state, event_data=event_data)
        self.apply(fn, output["data"])
        while output["is_generating"]:
            output = await self.demo.process_api(fn, [], state=self.state, iterator=output["iterator"],
                                                 event_data=event_data)
            self.apply(fn, output["data"])

    def apply(self, fn, data: list) -> None:
        for block, value in zip(fn.outputs, data):
            if block.stateful:
                continue
            if isinstance(value, dict) and value.get("__type__") == "update":
                if "value" in value:
                    self.values[block._id] = value["value"]
            else:
                self.values[block._id] = value


async def run_event(page, fn, visitor: Visitor, inputs: list) -> tuple[str | None, bool]:
    """(None, True) when the event answers with values for its outputs, (None, False) when it answers with a
    gr.Error for the visitor; (what went wrong, False) for any other exception on the server."""
    demo, _, named = page
    data = next((EVENT_DATA[(named.get(block_id), event)] for block_id, event in fn.targets
                 if (named.get(block_id), event) in EVENT_DATA), None)
    target = demo.blocks.get(fn.targets[0][0]) if fn.targets and fn.targets[0][0] is not None else None
    event_data = EventData(target, data) if fn.collects_event_data else None
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*output values.*")  # Gradio's "returned too many"
            if fn.validator is not None:  # the check the queue runs first (a failed one is the visitor's message)
                await demo.process_api(create_validator_fn(fn), list(inputs), state=visitor.state,
                                       event_data=event_data)
            await visitor.call(fn, list(inputs), event_data)
    except gr.Error:
        return None, False
    except Exception as error:  # noqa: BLE001 - any other exception is what the test reports
        return f"{type(error).__name__}: {error}", False
    return None, True


async def run_chain(page, fn, visitor: Visitor, inputs: list) -> list[str]:
    """The event, then the events chained after it (.then always, .success on an answer) on the same page."""
    problem, answered = await run_event(page, fn, visitor, inputs)
    found = [f"{names(page, fn)}: {problem}"] if problem else []
    for after in page[0].fns.values():
        if after.trigger_after == fn._id and after.fn is not None and (answered or not after.trigger_only_on_success):
            found += await run_chain(page, after, visitor, visitor.inputs(after))
    return found


def is_load(page, fn) -> bool:
    return any(event == "load" for _, event in fn.targets)


async def opened(page) -> Visitor:
    """A page just opened: its load events have run (the model's views and examples, a shared link, the footer)."""
    visitor = Visitor(page[0])
    for fn in page[0].fns.values():
        if fn.fn is not None and is_load(page, fn):
            problem, _ = await run_event(page, fn, visitor, visitor.inputs(fn))
            assert problem is None, f"{names(page, fn)}: {problem}"
    return visitor


async def translated(page, **settings) -> Visitor:
    """A page that has translated SENTENCE as the page does: Translate's answer from the JSON route (the browser's
    part: the route's service run, the result handed out under a key), then the result adopted and the open tab
    drawn by the events that follow the key's change. `settings` are page values set before Translate (by name)."""
    visitor, ui = await opened(page), page[1]
    c = ui.components
    visitor.values[c["source"]._id] = SENTENCE
    visitor.values |= {c[name]._id: value for name, value in settings.items()}
    request = Request.from_page(ui.registry, {name: visitor.values[c[name]._id] for name in ui.request_names})
    result = ui.service.run(request, FIRST_SCREEN)
    visitor.values |= {c["translation"]._id: result.translations[0].text, c["result_key"]._id: ui.hand_out(result),
                       c["live_attention"]._id: live_payload(result.translations[0])}
    adopt = next(fn for fn in page[0].fns.values() if (c["result_key"]._id, "change") in fn.targets)
    found = await run_chain(page, adopt, visitor, visitor.inputs(adopt))
    assert not found and visitor.state[ui.result_state._id] is result, found
    return visitor


def variants(visitor: Visitor, fn) -> list[tuple[str, list]]:
    """The inputs as the page holds them; every Radio and Dropdown input at its first choice, then at its last; and
    the choices of the component that triggers the event, one at a time (what a click on it sends)."""
    values = visitor.inputs(fn)
    offered = [visitor.choices(block) if isinstance(visitor.state[block._id], (gr.Radio, gr.Dropdown)) else []
               for block in fn.inputs]
    tried = [("page values", values)]
    for end, pick in (("first", 0), ("last", -1)):
        picked = [choices[pick] if choices else value for value, choices in zip(values, offered)]
        if picked != values:
            tried.append((f"every choice input at its {end} choice", picked))
    triggers = {block_id for block_id, _ in fn.targets}
    for index, block in enumerate(fn.inputs):
        if block._id in triggers:
            tried += [(f"input {index} = {choice!r}", values[:index] + [choice] + values[index + 1:])
                      for choice in offered[index] if choice != values[index]]
    return tried


def failures(page, visitor: Visitor, skip=lambda fn: False) -> list[str]:
    """Every event with a function on the server (not the browser's own JavaScript) and not `skip`ped, each variant
    of its inputs on a fork of `visitor`'s page, with the events chained after it; what went wrong, by event and
    variant."""
    found = []
    for fn in page[0].fns.values():
        if fn.fn is None or fn.trigger_after is not None or skip(fn):  # JavaScript alone; a chain's later link
            continue  # runs in its chain
        for label, inputs in variants(visitor, fn):
            found += [f"{problem} ({label})" for problem in asyncio.run(run_chain(page, fn, visitor.fork(), inputs))]
    return found


def test_every_event_answers_for_its_own_outputs_before_a_translation(page):
    found = failures(page, asyncio.run(opened(page)))
    assert not found, "\n".join(found)


def test_every_event_answers_for_its_own_outputs_after_a_translation(page):
    found = failures(page, asyncio.run(translated(page)))
    assert not found, "\n".join(found)


def test_the_check_finds_an_answer_outside_the_outputs(page):
    """The check can fail: an event whose answer names a component it does not list is reported, by name."""
    demo, ui, _ = page
    fn = next(fn for fn in demo.fns.values() if fn.name == "rerender")
    assert ui.components["summary"] not in fn.outputs
    wrong = copy.copy(fn)
    wrong.fn = lambda *values: {ui.components["summary"]: gr.update()}
    visitor = asyncio.run(opened(page))
    problem, _ = asyncio.run(run_event(page, wrong, visitor, visitor.inputs(fn)))
    assert problem and "not specified as output" in problem
