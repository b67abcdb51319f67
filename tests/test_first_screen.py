"""The page computes with a translation only what its first screen draws (each view declares the analyses it reads,
View.analyses); a tab's analyses are computed when the tab is first drawn, once per result, and equal what the
package computes for the same request on its own."""
import numpy as np
import pytest
import torch

from explorer.registry import discover
from explorer.request import Request
from explorer.shell import build_demo
from explorer.views import TRANSLATION
from transformer import Tokenizer, Transformer, Translator
from transformer.analysis.alti import contributions
from transformer.analysis.registered import ALTI_PLUS, LENS, NORMS
from transformer.checkpoint import save_checkpoint

from .conftest import tiny_config

SENTENCE = "a small dog runs"


@pytest.fixture(scope="module")
def page(tokenizer_file, tmp_path_factory):
    """The page, in-process, serving an untrained pre-norm checkpoint."""
    torch.manual_seed(1)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, d_model=32, n_layers=2))
    folder = save_checkpoint(tmp_path_factory.mktemp("first-screen") / "tiny", model, tokenizer_file)
    demo, ui = build_demo(discover(tmp_path_factory.mktemp("none"), [folder]))
    ui.demo = demo
    return ui, folder


def first_screen(ui, request):
    """What the page's Translate does: the views beside the input drawn, the tabs left for later."""
    shown = {view.name for view in ui.views if view.placement == "first_screen"}
    return ui.translate(request, only=shown)["result"]


def counting_decodes(monkeypatch, translator) -> list:
    calls = []
    decode = translator.translate_batch
    monkeypatch.setattr(translator, "translate_batch", lambda *a, **k: calls.append(k) or decode(*a, **k))
    return calls


@pytest.mark.parametrize("strategy, settings", [("greedy", {}), ("beam", {"beam_size": 3}),
                                                ("sample", {"temperature": 1.5, "seed": 7})])
def test_a_tab_computes_its_analysis_when_drawn_equal_to_the_package(page, monkeypatch, strategy, settings):
    ui, folder = page
    key = folder.name
    request = Request.build(ui.registry, SENTENCE, key, strategy=strategy, settings=settings, max_length=12)
    result = first_screen(ui, request)
    translation = result.translations[0]
    # the first screen's analyses (the live view: ALTI+ and the norms), and not the logit lens's (a tab)
    assert result.analysed == {ALTI_PLUS, NORMS}
    assert translation.logit_lens is None and translation.contributions is not None
    reference = Translator.from_pretrained(folder)  # the package alone, decoding with the lens on
    alone = reference.translate(SENTENCE, strategy=strategy, max_length=12, logit_lens=True, capture=True, **settings)
    np.testing.assert_allclose(translation.contributions.matrix,
                               contributions(reference.model, alone, torch.float64).matrix, atol=1e-5)
    served = ui.registry.get(key).translator
    calls = counting_decodes(monkeypatch, served)
    lens_view = ui.view("lens")
    state = ui.default_state()
    drawn = ui.render_named([lens_view], result, state, key, TRANSLATION)
    assert len(calls) == 1 and translation.tgt_ids == alone.tgt_ids
    # the same decoding run again with the lens recorded: the numbers of the package's own lens
    np.testing.assert_allclose(translation.logit_lens.chosen_prob, alone.logit_lens.chosen_prob, atol=1e-6)
    assert [[p for p, _ in top] for top in translation.logit_lens.topk[-1]] == [
        [p for p, _ in top] for top in alone.logit_lens.topk[-1]]
    assert "lens_plot" in drawn
    ui.render_named([lens_view], result, state, key, "sentence")  # drawn again: computed once per result
    assert len(calls) == 1 and result.analysed == {ALTI_PLUS, NORMS, LENS}


def test_an_equal_requests_result_shares_what_a_tab_computed(page, monkeypatch):
    ui, folder = page
    request = Request.build(ui.registry, "the dog sleeps", folder.name, strategy="greedy", max_length=12)
    first = first_screen(ui, request)
    ui.render_named([ui.view("lens")], first, ui.default_state(), folder.name, TRANSLATION)
    calls = counting_decodes(monkeypatch, ui.registry.get(folder.name).translator)
    again = first_screen(ui, request)  # from the result cache, its translations shared
    assert again.from_cache and again.translations[0].logit_lens is first.translations[0].logit_lens
    assert not calls


def handler(ui, component, event: str):
    """The function the page runs on `event` of `component`."""
    return next(fn.fn for fn in ui.demo.fns.values() if (component._id, event) in fn.targets and fn.fn is not None)


def test_a_control_redraws_what_is_on_screen_and_a_hidden_tab_when_it_opens(page):
    ui, folder = page
    result = first_screen(ui, Request.build(ui.registry, SENTENCE, folder.name, strategy="greedy", max_length=12))
    state = ui.default_state()
    values = [state[name] for name in ui.state_names]
    for tab in ("steps", "attention"):  # both drawn, the attention tab left open
        handler(ui, ui.tabs[tab], "select")(result, *values)
    assert {"steps", "attention"} <= result.rendered_views
    changed = state | {"head": "1"}
    updates = handler(ui, ui.components["head"], "input")(result, *[changed[name] for name in ui.state_names],
                                                           folder.name, "attention")
    steps_outputs = set(ui.outputs_of(ui.view("steps")))
    assert ui.components["attention_plot"] in updates and not steps_outputs & set(updates)
    assert "steps" not in result.rendered_views and "attention" in result.rendered_views
    # the steps tab, opened, is drawn at the head chosen while it was hidden
    opened = handler(ui, ui.tabs["steps"], "select")(result, *[changed[name] for name in ui.state_names])
    direct = ui.view("steps").render(result, changed, ui.context(folder.name), TRANSLATION)
    assert direct and all(same(opened[ui.components[name]], value) for name, value in direct.items())


def same(a, b) -> bool:
    """Two rendered values alike: figures by their JSON, tables by their cells."""
    if hasattr(a, "to_plotly_json"):
        return a.to_json() == b.to_json()
    if hasattr(a, "equals"):
        return a.equals(b)
    return a == b


def rerender_with(ui, model_key, result, state, open_tab, name):
    """What the page runs when the visitor changes control `name` to `state[name]` with `open_tab` open."""
    return handler(ui, ui.components[name], "input")(result, *[state[n] for n in ui.state_names], model_key, open_tab)


def title(figure) -> str:
    return figure.layout.title.text


def test_a_control_changed_while_its_tab_opens_is_what_the_tab_shows(page, monkeypatch):
    """The tab's opening waits in the queue with the controls as they were when it was clicked; the visitor's change
    of the tab's own control runs at once. Whichever ends last, the heatmap is the changed control's."""
    ui, folder = page
    request = Request.build(ui.registry, SENTENCE, folder.name, strategy="greedy", max_length=12)
    state = ui.default_state()
    assert state["kind"] == "cross"
    changed = state | {"kind": "encoder_self"}
    plot = ui.components["attention_plot"]
    wanted = title(ui.view("attention").render(first_screen(ui, request), changed, ui.context(folder.name),
                                               TRANSLATION)["attention_plot"])
    assert wanted.startswith("Encoder")
    open_attention = handler(ui, ui.tabs["attention"], "select")

    # the change runs first, while the server still thinks another tab is open; the opening comes after
    result = first_screen(ui, request)
    updates = rerender_with(ui, folder.name, result, changed, "steps", "kind")
    assert title(updates[plot]) == wanted
    opened = open_attention(result, *[state[name] for name in ui.state_names])
    assert plot not in opened and opened[ui.open_tab] == "attention"

    # the opening begins first and the change runs while it draws: the opening's older heatmap is dropped
    result = first_screen(ui, request)
    view = ui.view("attention")
    render, changes = view.render, []

    def slow_render(*args):
        drawn = render(*args)
        if not changes:  # the visitor's change lands now, once (its own drawing is not slowed)
            changes.append(None)
            changes[0] = rerender_with(ui, folder.name, result, changed, "steps", "kind")
        return drawn

    monkeypatch.setattr(view, "render", slow_render)
    opened = open_attention(result, *[state[name] for name in ui.state_names])
    assert plot not in opened and title(changes[0][plot]) == wanted


def test_the_open_tab_is_known_at_once_and_its_drawing_skips_the_queue(page):
    """Opening a tab sets the open tab by itself, at once, and draws the tab without the queue, as a control's redraw
    does: the browser applies answers as they arrive, and a queued one arrives later, through the queue's event
    stream (wiring.wire_tab)."""
    ui, _ = page
    selects = [fn for fn in ui.demo.fns.values() if (ui.tabs["attention"]._id, "select") in fn.targets]
    assert len(selects) == 2 and not any(fn.queue for fn in selects)
    eager = [fn for fn in selects if [block._id for block in fn.outputs] == [ui.open_tab._id]]
    assert len(eager) == 1 and eager[0].fn() == "attention"


def test_a_control_changed_again_while_its_redraw_runs_is_drawn_last(page):
    """Gradio's page drops an `.input` event's trigger while the same event still runs, unless its trigger mode says
    otherwise (its documented default, "once"): a second quick change of a control could leave the first one's
    picture under it. Every `.input` of the page runs its latest change once the running one ends."""
    ui, _ = page
    named = {component._id: name for name, component in ui.components.items()}
    inputs = {named.get(block, str(block)): fn.trigger_mode for fn in ui.demo.fns.values()
              for block, event in fn.targets if event == "input"}
    assert {"kind", "layer", "head", "sentence", "step", "learn_scrub", "walk_token"} <= set(inputs)
    assert {name: mode for name, mode in inputs.items() if mode != "always_last"} == {}


def test_a_jump_to_a_tab_is_not_drawn_over_by_the_opening_it_sets_off(page):
    """"Show this step in the logit lens" answers with the lens marked at the step and selects its tab; Gradio then
    fires that tab's select, as a click would. The opening must leave the marked figure (CI once showed the lens
    unmarked after the jump)."""
    ui, folder = page
    result = first_screen(ui, Request.build(ui.registry, SENTENCE, folder.name, strategy="greedy", max_length=12))
    state = ui.default_state() | {"step": 2}
    values = [state[name] for name in ui.state_names]
    jumped = handler(ui, ui.components["show_in_lens"], "click")(result, *values)
    assert title(jumped[ui.components["lens_plot"]]).endswith("(step 2 marked)")
    opened = handler(ui, ui.tabs["lens"], "select")(result, *values)
    assert ui.components["lens_plot"] not in opened and opened[ui.open_tab] == "lens"
