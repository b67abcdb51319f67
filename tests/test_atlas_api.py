"""/atlas_neighbours and /atlas_map (explorer/atlas_api.py), called as the app registers them, on a served tiny
checkpoint whose atlas/ folder was built here: answers counted from 1 and equal to the command line's, and every bad
argument answered with its name."""
import json
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest

from explorer.atlas_api import atlas_map_endpoint, atlas_neighbours_endpoint
from explorer.registry import discover
from transformer.atlas import Atlas, BuildSettings, build_atlas
from transformer.atlas.cli import main

from .atlas_fixtures import tiny_checkpoint


@pytest.fixture(scope="module")
def ui(tmp_path_factory, corpus_dir, tokenizer_file):
    root = tmp_path_factory.mktemp("served")
    with_atlas = tiny_checkpoint(root / "tiny", tokenizer_file)
    build_atlas(with_atlas, corpus_dir, with_atlas / "atlas", BuildSettings(sentences=24, sample=100, projection="pca"))
    tiny_checkpoint(root / "bare", tokenizer_file, seed=2)
    return SimpleNamespace(registry=discover(root))


def test_neighbours_equal_the_command_lines(ui, capsys):
    answer = atlas_neighbours_endpoint(ui)("a red ball .", token=2, layer=2, side="source", k=4, model="tiny")
    main(["neighbours", str(ui.registry.get("tiny").translator.source / "atlas"), "--sentence", "a red ball .",
          "--token", "2", "--layer", "2", "--k", "4"])
    assert answer["neighbours"] == json.loads(capsys.readouterr().out)["neighbours"]
    assert answer["piece"] == answer["pieces"]["source"][1] and len(answer["neighbours"]) == 4


def test_questions_about_one_sentence_translate_it_once(ui, monkeypatch, capsys):
    """The maps, then each token clicked: the sentence's vectors are made on the first question and kept, and every
    answer equals the command line's, which makes them afresh."""
    import explorer.atlas_service as service

    made = []
    make = service.vectors
    monkeypatch.setattr(service, "vectors", lambda *a: made.append(a[-1]) or make(*a))
    service._kept.clear()
    sentence = "a blue ball rolls ."
    atlas_map_endpoint(ui)("cross", 1, 1, text=sentence, model="tiny")
    for token in (1, 2, 3):
        answer = atlas_neighbours_endpoint(ui)(sentence, token=token, layer=2, k=3, model="tiny")
        main(["neighbours", str(ui.registry.get("tiny").translator.source / "atlas"), "--sentence", sentence,
              "--token", str(token), "--layer", "2", "--k", "3"])
        assert answer["neighbours"] == json.loads(capsys.readouterr().out)["neighbours"]
    assert made == [sentence]


def test_the_map_lists_each_sampled_token_and_places_the_sentence(ui):
    answer = atlas_map_endpoint(ui)(kind="cross", layer=1, head=2, text="a red ball .", model="tiny")
    atlas = Atlas.open(ui.registry.get("tiny").translator.source / "atlas")
    assert len(answer["queries"]["x"]) == len(atlas.sample_rows("target"))  # cross queries: target tokens
    assert len(answer["keys"]["x"]) == len(atlas.sample_rows("source"))
    first = atlas.record("source", int(atlas.sample_rows("source")[0]))
    assert (answer["keys"]["piece"][0], answer["keys"]["sentence"][0], answer["keys"]["position"][0]) == (
        first["piece"], first["sentence"] + 1, first["position"] + 1)
    assert answer["placed"]["keys"]["piece"][-1] == "</s>" and answer["placed"]["keys"]["side"] == "source"
    assert np.isfinite(answer["placed"]["queries"]["x"]).all()


@pytest.mark.parametrize("arguments, message", [
    ({"k": 0}, "k must be in [1, 100], got 0"),
    ({"k": float("nan")}, "k must be an integer in [1, 100], got nan"),
    ({"layer": 3}, "layer must be in [1, 2], got 3"),
    ({"token": 40}, "got 40 for the source side of this sentence"),
    ({"side": "middle"}, "side must be one of ['source', 'target'], got 'middle'"),
    ({"text": "one .\ntwo ."}, "one sentence at a time"),
    ({"model": "bare"}, "has no atlas: build one with"),
    ({"model": "nope"}, "unknown model 'nope'"),
])
def test_bad_neighbour_questions_are_named(ui, arguments, message):
    question = {"text": "a red ball .", "token": 1, "layer": 1, "side": "source", "k": 3, "model": "tiny"} | arguments
    with pytest.raises(gr.Error) as error:
        atlas_neighbours_endpoint(ui)(**question)
    assert message in str(error.value.message)


@pytest.mark.parametrize("arguments, message", [
    ({"kind": "values"}, "kind must be one of"),
    ({"head": 0}, "head must be in [1, 4], got 0"),  # the API's range before the atlas is read: [1, ...]
    ({"layer": "x"}, "layer must be an integer"),
])
def test_bad_map_questions_are_named(ui, arguments, message):
    with pytest.raises(gr.Error) as error:
        atlas_map_endpoint(ui)(**({"kind": "cross", "layer": 1, "head": 1, "model": "tiny"} | arguments))
    assert message.split(" in [")[0] in str(error.value.message)
