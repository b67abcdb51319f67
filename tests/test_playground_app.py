"""A playground checkpoint in the explorer: a width-16 run, saved and served while the app runs (`Registry.add`, as
the Learn tab's "Open this model in every tab" does), translates through the model service, draws in the Attention
tab with its own symbols as labels, and opens in the walk-through, whose numbers for the first source piece are
the model's own embedding row, whole (16 values), computed here."""
import numpy as np
import pytest
import torch

from explorer.registry import Registry
from explorer.request import Request
from explorer.session import ModelService
from explorer.views.attention import AttentionView
from explorer.views.base import TRANSLATION, ViewContext
from explorer.views.walkthrough_payload import walk_payload
from transformer.playground import PlaygroundRun, Settings, save_run


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    run = PlaygroundRun(Settings.checked(task="reverse", layers=1, heads=2, width=16, steps=10, redraw_every=10,
                                         held_out=10))
    run.train()
    folder = save_run(run, tmp_path_factory.mktemp("learn") / "run")
    registry = Registry({}, {})
    registry.add("learn-test", folder, "Playground: reverse")
    service = ModelService(registry)
    result = service.run(Request.build(registry, "3 1 4", model="learn-test", strategy="greedy"))
    yield registry, service, result
    torch.set_num_threads(threads)


def test_the_attention_tab_draws_its_symbols(served):
    registry, _, result = served
    translation = result.translations[0]
    assert translation.src_tokens == ["3", "1", "4", "</s>"]
    context = ViewContext("learn-test", {"learn-test": registry.get("learn-test").profile})
    state = {"kind": "cross", "layer": "0", "head": "1", "merge": False, "sentence": 0}
    figure = AttentionView().render(result, state, context, TRANSLATION)["attention_plot"]
    heatmap = figure.data[0]
    columns = [label.replace("\u200b", "").replace("\u200c", "") for label in heatmap.x]
    assert columns == ["3", "1", "4", "&lt;/s&gt;"]
    weights = np.asarray(heatmap.z, dtype=np.float64)
    assert np.allclose(weights.sum(-1), 1, atol=4e-4)  # rows of a softmax, rounded to 4 decimals per weight


def test_the_walkthrough_opens_with_whole_width_16_numbers(served):
    registry, service, result = served
    translation = result.translations[0]
    walk = service.walkthrough(result, translation, token=0, step=1)
    payload = walk_payload(walk)
    assert payload["token_piece"] == "3"
    model, tokenizer = registry.get("learn-test").translator.model, registry.get("learn-test").translator.tokenizer
    row = model.src_embed.embedding.weight[tokenizer.piece_to_id("3")].detach().numpy()
    stage = next(s for s in walk.stages if any(n.kind in ("vector", "row") and len(n.values) == 16 for n in s.numbers))
    shown = [np.asarray(n.values, dtype=np.float64) for n in stage.numbers if n.kind in ("vector", "row")]
    assert any(np.allclose(values, row, atol=1e-6) for values in shown if values.shape == (16,))


def test_the_walkthrough_speaks_of_symbols_not_word_marks(served):
    """A symbols vocabulary has no "▁" word marks and no byte pieces: its first stage says what it does instead
    (one piece per symbol), and shows no row about either."""
    registry, service, result = served
    walk = service.walkthrough(result, result.translations[0], token=0, step=1)
    stage = next(s for s in walk.stages if s.key == "text.pieces")
    words = f"{stage.title} {stage.text} {stage.formula} {stage.why}"
    assert "▁" not in words + "".join(stage.terms) and "byte" not in words and "one piece per symbol" in words
    assert [n.name for n in stage.numbers] == ["pieces", "ids", "unknown", "vocabulary"]
    assert stage.numbers[0].values == ["3", "1", "4", "</s>"]
