"""An atlas of a model whose encoder and decoder differ in shape (3 encoder layers of 4 heads, 2 decoder layers of 2
heads, as a distilled OPUS-MT student is deep-encoder, shallow-decoder): each kind laid out in its own stack's layers,
heads and head size, each side in its own stack's layers; records, vectors and the sampled queries and keys equal
to a forward pass computed here; neighbours on both sides; a map for every head of every kind; and a layer or head
beyond a kind's stack refused by the API and fitted by the tab, in one line naming the range."""
import json
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
import torch

from explorer.atlas_api import atlas_map_endpoint, atlas_neighbours_endpoint
from explorer.registry import discover
from explorer.views.atlas import AtlasView
from transformer.atlas import Atlas, BuildSettings, build_atlas
from transformer.atlas.cli import main
from transformer.atlas.extract import part_side
from transformer.atlas.query import head_points, placed, sentence_vectors, similar_heads
from transformer.atlas.store import SIDES, STACK_OF, stack
from transformer.checkpoint import load_checkpoint
from transformer.core.capture import capture_attention
from transformer.core.model import causal_mask, padding_mask, target_padding_mask

from .atlas_fixtures import SENTENCES, tiny_checkpoint
from .conftest import ROOT
from .test_unequal_stacks import UNEQUAL

# what the test expects of each kind and side, written out rather than read from the code: (layers, heads)
KIND_SHAPES = {"encoder_self": (3, 4), "decoder_self": (2, 2), "cross": (2, 2)}
SIDE_LAYERS = {"source": 3, "target": 2}
D_MODEL = 16  # tests/conftest.py's tiny_config


@pytest.fixture(scope="module")
def unequal(tmp_path_factory, corpus_dir, tokenizer_file):
    root = tmp_path_factory.mktemp("unequal")
    checkpoint = tiny_checkpoint(root / "tiny", tokenizer_file, **UNEQUAL)
    build_atlas(checkpoint, corpus_dir, checkpoint / "atlas",
                BuildSettings(sentences=SENTENCES, batch_size=8, sample=200, projection="pca"))
    return Atlas.open(checkpoint / "atlas"), checkpoint, corpus_dir, root


def test_each_kind_and_side_has_its_own_stacks_shape(unequal):
    atlas, checkpoint, _, _ = unequal
    config = load_checkpoint(checkpoint)[0].config
    for name in STACK_OF:  # the atlas's table of stacks says what the model's config says
        assert stack(config, name) == config.stack_of({"source": "encoder", "target": "decoder"}.get(name, name))
    assert atlas.manifest["format"] == 2 and atlas.indexed == {"source": (0, 1, 2), "target": (0, 1)}
    for kind, (layers, heads) in KIND_SHAPES.items():
        for part in ("queries", "keys"):
            sampled = len(atlas.sample_rows(part_side(kind, part)))
            assert atlas.samples(kind, part).shape == (layers, heads, sampled, D_MODEL // heads)
        maps, _ = atlas.maps(kind)
        assert [len(row) for row in maps] == [heads] * layers
    for side, layers in SIDE_LAYERS.items():
        assert sorted(p.name for p in (atlas.folder / "index").glob(f"{side}-*")) == [
            f"{side}-layer-{n}.faiss" for n in range(1, layers + 1)]
    record = atlas.record("target", 0)
    assert len(record["cross_argmax"]) == len(record["cross_entropy"]) == 2 * 2  # the decoder's layers x heads


def teacher_forced(model, src_ids, tgt_ids):
    """Each layer's input and output on both sides, the encoder's output and cross-attention's weights (layers,
    heads, T, S) for one unpadded pair: computed here, layer by layer, outside the atlas's batched pass."""
    src = torch.tensor([src_ids])
    tgt = torch.tensor([[model.config.decoder_start_id] + tgt_ids[:-1]])
    src_mask = padding_mask(src, model.config.pad_id)
    tgt_mask = target_padding_mask(tgt, model.config.pad_id) & causal_mask(tgt.size(1), tgt.device)
    inputs, outputs = {"source": [], "target": []}, {"source": [], "target": []}
    with torch.no_grad():
        x = model.embed(src, model.src_embed)
        for layer in model.encoder_layers:
            inputs["source"].append(x[0])
            x = layer(x, src_mask)
            outputs["source"].append(x[0])
        memory = model.encoder_norm(x)
        y = model.embed(tgt, model.tgt_embed, side="decoder")
        with capture_attention(model, ["cross"]) as recording:
            for layer in model.decoder_layers:
                inputs["target"].append(y[0])
                y = layer(y, memory, src_mask, tgt_mask)
                outputs["target"].append(y[0])
    return inputs, outputs, memory[0], recording.cross[:, 0]


def projected(attention, normed: torch.Tensor, part: int, heads: int) -> np.ndarray:
    """(T, heads, D / heads): rows `part` (0 queries, 1 keys) of the stacked in_proj applied to (T, D) inputs."""
    rows = slice(part * D_MODEL, (part + 1) * D_MODEL)
    with torch.no_grad():
        out = normed @ attention.in_proj.weight[rows].T + attention.in_proj.bias[rows]
    return out.view(len(normed), heads, D_MODEL // heads).numpy()


def expected_parts(model, inputs, memory, layer: int) -> dict:
    """(kind, part) -> (T, heads, hs) at `layer`, for the kinds and parts a layer's input gives (pre-norm: each
    attention reads its residual's LayerNorm of the layer's input; cross keys read the encoder's output)."""
    expected = {}
    if layer < 3:
        encoder = model.encoder_layers[layer]
        with torch.no_grad():
            normed = encoder.attention_residual.norm(inputs["source"][layer])
        for part in (0, 1):
            expected["encoder_self", part] = projected(encoder.self_attention, normed, part, 4)
    if layer < 2:
        decoder = model.decoder_layers[layer]
        with torch.no_grad():
            normed = decoder.self_attention_residual.norm(inputs["target"][layer])
        for part in (0, 1):
            expected["decoder_self", part] = projected(decoder.self_attention, normed, part, 2)
        expected["cross", 1] = projected(decoder.cross_attention, memory, 1, 2)  # the decoder's heads, source tokens
    return expected


def test_records_vectors_and_samples_equal_a_forward_pass(unequal):
    atlas, checkpoint, corpus_dir, _ = unequal
    model, tokenizer, _ = load_checkpoint(checkpoint)
    source = (corpus_dir / "train.en").read_text().splitlines()
    target = (corpus_dir / "train.de").read_text().splitlines()
    records = {side: atlas.records(side).to_pydict() for side in SIDES}
    sampled = {side: {int(row): i for i, row in enumerate(atlas.sample_rows(side))} for side in SIDES}
    checked = 0
    for sentence in (0, 9, SENTENCES - 1):
        ids = {"source": tokenizer.encode(source[sentence]) + [tokenizer.eos_id],
               "target": tokenizer.encode(target[sentence]) + [tokenizer.eos_id]}
        inputs, outputs, memory, cross = teacher_forced(model, ids["source"], ids["target"])
        rows = {side: [r for r, s in enumerate(records[side]["sentence"]) if s == sentence] for side in SIDES}
        for side in SIDES:
            assert [records[side]["token_id"][r] for r in rows[side]] == ids[side]
        assert cross.shape[:2] == (2, 2)  # the decoder's layers and heads
        weights = cross.permute(2, 0, 1, 3).double()  # (T, L, H, S)
        stored = {name: np.array([records["target"][name][r] for r in rows["target"]]).reshape(-1, 2, 2)
                  for name in ("cross_argmax", "cross_entropy")}
        np.testing.assert_array_equal(stored["cross_argmax"], weights.argmax(-1).numpy())  # discrete choices
        # float32 in the atlas; no masked keys in an unpadded pair
        np.testing.assert_allclose(stored["cross_entropy"], -(weights * weights.log()).sum(-1).numpy(), rtol=1e-4,
                                   atol=1e-5)
        for side, layers in SIDE_LAYERS.items():
            assert len(outputs[side]) == layers
            for layer in range(layers):
                # float16 storage: a relative error up to 2^-11; padding in the atlas's batches changes the sums'
                # order, which moves float32 results by ~1e-6
                np.testing.assert_allclose(np.asarray(atlas.vectors(side, layer)[rows[side]], np.float32),
                                           outputs[side][layer].numpy(), rtol=2**-11, atol=1e-4)
        for layer in range(3):
            for (kind, part), vectors in expected_parts(model, inputs, memory, layer).items():
                side = part_side(kind, ("queries", "keys")[part])
                stored = atlas.samples(kind, ("queries", "keys")[part])
                for position, row in enumerate(rows[side]):
                    if row in sampled[side]:  # float16 storage, as above
                        np.testing.assert_allclose(np.asarray(stored[layer, :, sampled[side][row]], np.float32),
                                                   vectors[position], rtol=2**-11, atol=1e-4)
                        checked += 1
    assert checked > 50, checked


def test_neighbours_on_both_sides_at_each_sides_layers(unequal, capsys):
    atlas, _, corpus_dir, _ = unequal
    sentence = (corpus_dir / "train.en").read_text().splitlines()[5]
    ask = ["neighbours", str(atlas.folder), "--sentence", sentence, "--token", "2", "--k", "3"]
    main([*ask, "--layer", "3"])  # the encoder's last layer: the source side has 3
    first = json.loads(capsys.readouterr().out)["neighbours"][0]
    assert (first["sentence"], first["position"]) == (6, 2) and first["distance"] < 1e-2  # itself, float16 equal
    main([*ask, "--layer", "2", "--side", "target"])
    answer = json.loads(capsys.readouterr().out)
    assert answer["layer"] == 2 and len(answer["neighbours"]) == 3
    with pytest.raises(SystemExit):
        main([*ask, "--layer", "3", "--side", "target"])
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and ("layer must be in [1, 2], got 3 (the target side is the decoder's: 2 "
                                         "layers)") in message


def test_a_map_for_every_head_of_every_kind(unequal):
    atlas, checkpoint, corpus_dir, _ = unequal
    model, tokenizer, _ = load_checkpoint(checkpoint)
    vectors = sentence_vectors(model, tokenizer, (corpus_dir / "train.en").read_text().splitlines()[3])
    for kind, (layers, heads) in KIND_SHAPES.items():
        for layer in range(layers):
            for head in range(heads):
                points = head_points(atlas, kind, layer, head)
                on_map = placed(atlas, vectors, kind, layer, head)
                for part in ("queries", "keys"):
                    assert len(points[part]["coordinates"]) == len(atlas.sample_rows(part_side(kind, part)))
                    assert np.isfinite(points[part]["coordinates"]).all() and np.isfinite(on_map[part]).all()
                others = similar_heads(atlas, kind, layer, head)  # every other head of this kind, none of another
                assert sorted((lay, hd) for lay, hd, _ in others) == sorted(
                    (lay, hd) for lay in range(layers) for hd in range(heads) if (lay, hd) != (layer, head))


@pytest.fixture(scope="module")
def ui(unequal):
    _, _, _, root = unequal
    return SimpleNamespace(registry=discover(root))


@pytest.mark.parametrize("arguments, message", [
    ({"kind": "cross", "layer": 3}, "layer must be in [1, 2], got 3 (cross is the decoder's: 2 layers of 2 heads)"),
    ({"kind": "decoder_self", "head": 3}, "head must be in [1, 2], got 3 (decoder_self is the decoder's: 2 layers"),
    ({"kind": "encoder_self", "layer": 4}, "layer must be in [1, 3], got 4 (encoder_self is the encoder's: 3 layers"),
    ({"kind": "encoder_self", "head": 5}, "head must be in [1, 4], got 5 (encoder_self is the encoder's"),
])
def test_the_api_refuses_a_head_beyond_its_kinds_stack(ui, arguments, message):
    with pytest.raises(gr.Error) as error:
        atlas_map_endpoint(ui)(**({"layer": 1, "head": 1, "model": "tiny"} | arguments))
    assert message in error.value.message and "\n" not in error.value.message


def test_the_api_answers_within_each_kinds_stack(ui):
    answer = atlas_map_endpoint(ui)(kind="encoder_self", layer=3, head=4, model="tiny")
    assert len(answer["similar_heads"]) == 3 * 4 - 1
    assert atlas_map_endpoint(ui)(kind="cross", layer=2, head=2, model="tiny")["layer"] == 2
    assert len(atlas_neighbours_endpoint(ui)("a red ball .", token=1, layer=3, side="source", k=2,
                                             model="tiny")["neighbours"]) == 2
    with pytest.raises(gr.Error) as error:
        atlas_neighbours_endpoint(ui)("a red ball .", token=1, layer=3, side="target", k=2, model="tiny")
    assert "layer must be in [1, 2], got 3 (the target side is the decoder's: 2 layers)" in error.value.message


def test_the_tab_fits_a_choice_to_the_kinds_stack_and_refuses_one_beyond_every_stack(ui):
    view = AtlasView()
    drawn = view.maps(ui, None, {"atlas_kind": "cross"}, "2", "3")  # layer 3, head 4: the encoder's, not cross's
    assert drawn["atlas_text"].startswith("Layer 3 is beyond this stack (cross is the decoder's: 2 layers of 2 "
                                          "heads): its last is shown. Head 4 is beyond this stack")
    figure = drawn["atlas_matrix"]
    assert len(figure.data) == 2 * 2 * 2  # the decoder's 2 layers x 2 heads, queries and keys each
    assert "layer 2, head 2" in drawn["atlas_head"].layout.title.text
    encoder = view.maps(ui, None, {"atlas_kind": "encoder_self"}, "2", "3")
    assert len(encoder["atlas_matrix"].data) == 3 * 4 * 2 and "beyond" not in encoder["atlas_text"]
    with pytest.raises(gr.Error) as error:
        view.maps(ui, None, {"atlas_kind": "encoder_self"}, "3", "0")
    assert error.value.message == "layer must be in [1, 3], got 4"


def test_layers_to_index_are_checked_against_each_sides_stack(unequal, tmp_path, capsys):
    atlas, checkpoint, corpus_dir, _ = unequal
    out = tmp_path / "atlas"
    main(["build", str(checkpoint), str(corpus_dir), str(out), "--sentences", "12", "--layers", "2,3",
          "--projection", "pca", "--drop-samples"])
    capsys.readouterr()
    # layer 3 only the encoder has: indexed on the source side only
    assert sorted(p.name for p in (out / "index").iterdir()) == [
        "source-layer-2.faiss", "source-layer-3.faiss", "target-layer-2.faiss"]
    assert Atlas.open(out).indexed == {"source": (1, 2), "target": (1,)}
    with pytest.raises(SystemExit):
        main(["build", str(checkpoint), str(corpus_dir), str(tmp_path / "x"), "--layers", "4"])
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and "--layers must name layers in [1, 3] (the source side has the encoder's 3, " \
                                        "the target side the decoder's 2; a layer only one side has is indexed on " \
                                        "that side only), got [4]" in message
    assert not (tmp_path / "x").exists()



@pytest.mark.parametrize("pair", ["en-de", "de-en"])
def test_a_shipped_format_1_atlas_still_opens_and_answers(pair):
    """The shipped atlases were written as format 1 (one shape for both stacks, one list of indexed layers); they
    are read as they are, each kind and side taking the one shape."""
    folder = ROOT / "checkpoints" / pair / "atlas"
    if not (folder / "atlas.json").is_file():
        pytest.skip("no shipped atlas")
    atlas = Atlas.open(folder)
    model = json.loads((folder / "atlas.json").read_text())["model"]
    assert atlas.manifest["format"] == 1
    assert atlas.indexed == {"source": (3,), "target": (3,)}
    for kind in ("encoder_self", "decoder_self", "cross"):
        assert atlas.stack(kind)[:2] == (model["n_layers"], model["n_heads"])
    last = (model["n_layers"] - 1, model["n_heads"] - 1)
    assert len(head_points(atlas, "cross", *last)["keys"]["piece"]) == len(atlas.sample_rows("source"))
    assert len(similar_heads(atlas, "decoder_self", *last)) == model["n_layers"] * model["n_heads"] - 1
