"""The corpus atlas (transformer/atlas/): built from a tiny model over a tiny corpus made here, its records, vectors
and index checked against computations made in the test."""
import json
import shutil

import numpy as np
import pytest
import torch

from transformer import Translator
from transformer.atlas import Atlas, BuildSettings, build_atlas
from transformer.atlas.cli import main
from transformer.atlas.index import read_index
from transformer.atlas.store import SIDES, index_file
from transformer.checkpoint import load_checkpoint
from transformer.core.capture import capture_attention
from transformer.core.model import causal_mask, padding_mask, target_padding_mask

from .atlas_fixtures import SENTENCES, tiny_checkpoint


@pytest.fixture(scope="module")
def built(tmp_path_factory, corpus_dir, tokenizer_file):
    root = tmp_path_factory.mktemp("atlas")
    checkpoint = tiny_checkpoint(root / "checkpoint", tokenizer_file)
    settings = BuildSettings(sentences=SENTENCES, batch_size=8, sample=200, projection="pca")
    build_atlas(checkpoint, corpus_dir, root / "atlas", settings)
    return root / "atlas", checkpoint, corpus_dir


def forward_by_layers(model, src_ids, tgt_ids):
    """Each encoder and decoder layer's output for one unpadded pair, layer by layer, and cross-attention's
    weights (layers, heads, T, S): computed here, outside the atlas's batched, recorded pass."""
    src = torch.tensor([src_ids])
    tgt = torch.tensor([[model.config.decoder_start_id] + tgt_ids[:-1]])
    src_mask = padding_mask(src, model.config.pad_id)
    with torch.no_grad():
        x, encoder = model.embed(src, model.src_embed), []
        for layer in model.encoder_layers:
            x = layer(x, src_mask)
            encoder.append(x[0])
        memory = model.encoder_norm(x)
        tgt_mask = target_padding_mask(tgt, model.config.pad_id) & causal_mask(tgt.size(1), tgt.device)
        y, decoder = model.embed(tgt, model.tgt_embed, side="decoder"), []
        with capture_attention(model, ["cross"]) as recording:
            for layer in model.decoder_layers:
                y = layer(y, memory, src_mask, tgt_mask)
                decoder.append(y[0])
    return {"source": torch.stack(encoder), "target": torch.stack(decoder)}, recording.cross[:, 0]


def test_records_equal_a_forward_pass(built):
    folder, checkpoint, corpus_dir = built
    atlas = Atlas.open(folder)
    model, tokenizer, _ = load_checkpoint(checkpoint)
    source = (corpus_dir / "train.en").read_text().splitlines()[:SENTENCES]
    target = (corpus_dir / "train.de").read_text().splitlines()[:SENTENCES]
    assert atlas.sentences.to_pydict() == {"source": source, "target": target}
    records = {side: atlas.records(side).to_pydict() for side in SIDES}
    for sentence in (0, 7, SENTENCES - 1):
        ids = {"source": tokenizer.encode(source[sentence]) + [tokenizer.eos_id],
               "target": tokenizer.encode(target[sentence]) + [tokenizer.eos_id]}
        hidden, cross = forward_by_layers(model, ids["source"], ids["target"])
        for side in SIDES:
            rows = [r for r, s in enumerate(records[side]["sentence"]) if s == sentence]
            assert [records[side]["position"][r] for r in rows] == list(range(len(ids[side])))
            assert [records[side]["token_id"][r] for r in rows] == ids[side]
            assert [records[side]["piece"][r] for r in rows] == [tokenizer.id_to_piece(i) for i in ids[side]]
            for layer in range(model.config.n_layers):
                stored = np.asarray(atlas.vectors(side, layer)[rows], np.float32)
                # float16 storage: a relative error up to 2^-11; padding in the atlas's batches changes the sums'
                # order, which moves float32 results by ~1e-6
                np.testing.assert_allclose(stored, hidden[side][layer].numpy(), rtol=2**-11, atol=1e-4)
        rows = [r for r, s in enumerate(records["target"]["sentence"]) if s == sentence]
        layers, heads = model.config.n_layers, model.config.n_heads
        argmax = np.array([records["target"]["cross_argmax"][r] for r in rows]).reshape(len(rows), layers, heads)
        entropy = np.array([records["target"]["cross_entropy"][r] for r in rows]).reshape(len(rows), layers, heads)
        weights = cross.permute(2, 0, 1, 3).double()  # (T, L, H, S)
        np.testing.assert_array_equal(argmax, weights.argmax(-1).numpy())  # discrete, like a token's choice
        expected = -(weights * weights.log()).sum(-1).numpy()  # no masked keys in an unpadded pair
        np.testing.assert_allclose(entropy, expected, rtol=1e-4, atol=1e-5)  # float32 in the atlas


def exact_neighbours(vectors: np.ndarray, k: int):
    """Brute-force k nearest rows in float64 (independent of FAISS): (distances, rows)."""
    squared = (vectors**2).sum(1)
    distances = np.sqrt(np.maximum(squared[:, None] + squared[None, :] - 2 * vectors @ vectors.T, 0))
    rows = np.argsort(distances, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(distances, rows, 1), rows


@pytest.mark.parametrize("side", SIDES)
def test_nearest_neighbour_is_itself_and_the_index_equals_exact_search(built, side):
    folder, _, _ = built
    atlas = Atlas.open(folder)
    for layer in range(atlas.stack(side).layers):
        vectors = np.asarray(atlas.vectors(side, layer), np.float64)
        distances, rows = exact_neighbours(vectors, 10)
        unique = np.unique(vectors, axis=0, return_counts=True)[1].max() == 1
        assert unique, "the tiny corpus has no two tokens with one vector"
        # float16-exact vectors: their squares and dot products are exact in float64, so each row's distance to
        # itself is exactly 0
        np.testing.assert_array_equal(rows[:, 0], np.arange(len(vectors)))
        assert np.all(distances[:, 0] == 0)
        index = read_index(folder / index_file(side, layer), nprobe=1)
        index.nprobe = index.nlist  # every list scanned: the index must then be exact
        found_d, found_rows = index.search(vectors.astype(np.float32), 10)
        # the same neighbours as exact search: the rows it found lie at the exact k nearest distances (rows whose
        # distances differ by float32 rounding, ~1e-6, may trade places) and nearly all in the same order
        found_exact = np.linalg.norm(vectors[found_rows] - vectors[:, None], axis=-1)
        np.testing.assert_allclose(found_exact, distances, rtol=1e-5, atol=1e-6)
        assert np.mean(found_rows == rows) > 0.99
        # FAISS sums squares in float32 over float16-exact values: relative error ~1e-6 of the squared distance
        np.testing.assert_allclose(np.sqrt(np.maximum(found_d, 0)), distances, rtol=1e-4, atol=1e-3)
        tuned = atlas.index(side, layer)
        recall = np.mean([len(set(f) & set(e)) / 10 for f, e in zip(tuned.search(vectors.astype(np.float32), 10)[1],
                                                                       rows)])
        assert recall >= 0.9, f"recall@10 {recall} at nprobe {tuned.nprobe} for {side} layer {layer + 1}"


def test_neighbours_of_a_corpus_sentence_start_with_its_own_token(built, capsys):
    folder, _, corpus_dir = built
    sentence = (corpus_dir / "train.en").read_text().splitlines()[5]
    main(["neighbours", str(folder), "--sentence", sentence, "--token", "2", "--layer", "2", "--k", "4"])
    answer = json.loads(capsys.readouterr().out)
    first = answer["neighbours"][0]
    assert (first["sentence"], first["position"], first["source"]) == (6, 2, sentence)  # both counted from 1
    assert first["distance"] < 1e-2  # the same computation, batched with other lengths of padding: float16 equal
    assert [n["distance"] for n in answer["neighbours"]] == sorted(n["distance"] for n in answer["neighbours"])
    assert len(answer["neighbours"]) == 4 and answer["layer"] == 2


def test_target_neighbours_are_at_the_distances_of_a_teacher_forced_translation(built, capsys):
    folder, checkpoint, _ = built
    sentence = "a dog runs on the street ."
    main(["neighbours", str(folder), "--sentence", sentence, "--token", "2", "--layer", "1", "--side", "target",
          "--k", "3"])
    answer = json.loads(capsys.readouterr().out)
    model, tokenizer, _ = load_checkpoint(checkpoint)
    translation = Translator(model, tokenizer).translate(sentence, strategy="greedy")
    hidden, _ = forward_by_layers(model, translation.src_ids, translation.tgt_ids)
    query = hidden["target"][0][1].half().double().numpy()  # layer 1, token 2: stored as float16, like the corpus's
    atlas = Atlas.open(folder)
    vectors = np.asarray(atlas.vectors("target", 0), np.float64)
    records = atlas.records("target").select(["sentence", "position"]).to_pydict()
    rows = {place: row for row, place in enumerate(zip(records["sentence"], records["position"]))}
    found = [rows[(n["sentence"] - 1, n["position"] - 1)] for n in answer["neighbours"]]
    distances = np.linalg.norm(vectors - query, axis=1)
    # FAISS's float32 sums against this float64 computation: ~1e-6 relative; the answer rounds to 6 decimals
    np.testing.assert_allclose([n["distance"] for n in answer["neighbours"]], distances[found], rtol=1e-4, atol=1e-5)
    assert answer["piece"] == tokenizer.id_to_piece(translation.tgt_ids[1]) and len(set(found)) == 3
    assert distances[found[0]] <= np.sort(distances)[1] + 1e-5  # the tuned index found one of the two nearest


@pytest.mark.parametrize("stage", ["extraction", "maps"])
def test_an_interrupted_build_leaves_no_atlas(tmp_path, corpus_dir, tokenizer_file, monkeypatch, stage):
    checkpoint = tiny_checkpoint(tmp_path / "checkpoint", tokenizer_file)
    from transformer.atlas import build as build_module
    from transformer.atlas import engines

    batches = []

    def interrupted(*args):
        batches.append(1)
        if stage == "maps" or len(batches) == 2:  # the second batch: midway through the extraction
            raise KeyboardInterrupt
        return extract_batch(*args)

    extract_batch = engines.extract_batch
    monkeypatch.setattr(engines, "extract_batch", interrupted)
    if stage == "maps":
        monkeypatch.setattr(engines, "extract_batch", extract_batch)
        monkeypatch.setattr(build_module, "build_maps", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_atlas(checkpoint, corpus_dir, tmp_path / "atlas", BuildSettings(sentences=8, batch_size=2,
                                                                              projection="pca"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def one_line_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and "Traceback" not in message, message
    return message


def test_bad_build_inputs_get_one_line(tmp_path, corpus_dir, tokenizer_file, capsys):
    checkpoint = str(tiny_checkpoint(tmp_path / "checkpoint", tokenizer_file))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.en").write_text("a dog .\ntwo dogs .\n")
    (corpus / "train.de").write_text("ein hund .\n")
    out = str(tmp_path / "atlas")
    assert "has 2 lines but" in one_line_error(capsys, ["build", checkpoint, str(corpus), out])
    assert "does not exist" in one_line_error(capsys, ["build", checkpoint, str(tmp_path / "none"), out])
    assert "--batch-size" in one_line_error(capsys, ["build", checkpoint, str(corpus_dir), out, "--batch-size", "0"])
    assert "--sentences" in one_line_error(capsys, ["build", checkpoint, str(corpus_dir), out, "--sentences", "nan"])
    broken = tmp_path / "broken-checkpoint"
    shutil.copytree(checkpoint, broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    assert "model.safetensors: truncated or not a safetensors file" in one_line_error(
        capsys, ["build", str(broken), str(corpus_dir), out])
    shutil.rmtree(broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "corpus"]


def test_too_little_disk_is_one_line_before_anything_is_written(tmp_path, corpus_dir, tokenizer_file, capsys,
                                                                 monkeypatch):
    checkpoint = str(tiny_checkpoint(tmp_path / "checkpoint", tokenizer_file))
    from transformer.atlas import build as build_module

    monkeypatch.setattr(build_module.shutil, "disk_usage", lambda folder: shutil._ntuple_diskusage(10**9, 10**9, 1000))
    message = one_line_error(capsys, ["build", checkpoint, str(corpus_dir), str(tmp_path / "atlas"), "--sentences",
                                      "20"])
    assert "too little disk" in message and "0.00 GB are free" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_bad_questions_get_one_line(built, tmp_path, tokenizer_file, capsys):
    folder, _, _ = built
    ask = ["neighbours", str(folder), "--sentence", "a dog .", "--token", "1"]
    assert "--k" in one_line_error(capsys, [*ask, "--layer", "1", "--k", "0"])
    assert "--k" in one_line_error(capsys, [*ask, "--layer", "1", "--k", "NaN"])
    assert "layer must be in [1, 2], got 3" in one_line_error(capsys, [*ask, "--layer", "3"])
    assert "token must be in [1," in one_line_error(capsys, [*ask[:-1], "99", "--layer", "1"])
    other = tiny_checkpoint(tmp_path / "other", tokenizer_file, seed=1)
    assert "another checkpoint" in one_line_error(capsys, [*ask, "--layer", "1", "--checkpoint", str(other)])
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    (broken / "vectors" / "source-layer-1.npy").write_bytes(b"\x93NUMPY")
    assert "source-layer-1.npy: corrupt" in one_line_error(capsys, ["neighbours", str(broken), *ask[2:], "--layer",
                                                                     "1"])
    (broken / "atlas.json").write_text("{")
    assert "atlas.json: corrupt" in one_line_error(capsys, ["neighbours", str(broken), *ask[2:], "--layer", "1"])
    (broken / "atlas.json").unlink()
    assert "atlas.json: file is missing" in one_line_error(capsys, ["neighbours", str(broken), *ask[2:], "--layer",
                                                                     "1"])
    assert (folder / "atlas.json").is_file()  # nothing lost


def test_an_atlas_of_one_layer_without_samples(tmp_path, corpus_dir, tokenizer_file, capsys):
    """What a shipped atlas leaves out to fit its size: the other layers' vectors, and (PCA maps) the samples."""
    checkpoint = tiny_checkpoint(tmp_path / "checkpoint", tokenizer_file)
    folder = tmp_path / "atlas"
    main(["build", str(checkpoint), str(corpus_dir), str(folder), "--sentences", "12", "--layers", "2",
          "--projection", "pca", "--drop-samples"])
    assert "wrote" in capsys.readouterr().out
    assert sorted(p.name for p in (folder / "vectors").iterdir()) == ["source-layer-2.npy", "target-layer-2.npy"]
    assert sorted(p.name for p in (folder / "samples").iterdir()) == ["source-rows.npy", "target-rows.npy"]
    ask = ["neighbours", str(folder), "--sentence", "a dog .", "--token", "1", "--k", "2"]
    assert "layer 1 is not indexed on the source side of this atlas (indexed: 2)" in one_line_error(
        capsys, [*ask, "--layer", "1"])
    main([*ask, "--layer", "2"])
    assert len(json.loads(capsys.readouterr().out)["neighbours"]) == 2
    compact = tmp_path / "compact"
    main(["build", str(checkpoint), str(corpus_dir), str(compact), "--sentences", "12", "--layers", "2",
          "--projection", "pca", "--drop-samples", "--index-only"])
    capsys.readouterr()
    assert not list((compact / "vectors").iterdir())
    for side in SIDES:  # the index's float16 copy is the vectors exactly
        np.testing.assert_array_equal(Atlas.open(compact).vectors(side, 1), Atlas.open(folder).vectors(side, 1))
    assert "--layers" in one_line_error(capsys, ["build", str(checkpoint), str(corpus_dir), str(tmp_path / "x"),
                                                 "--layers", "3"])
    assert "needs --projection pca" in one_line_error(capsys, ["build", str(checkpoint), str(corpus_dir),
                                                               str(tmp_path / "x"), "--drop-samples"])


def test_a_converted_opus_mt_model_gets_an_atlas(tmp_path, capsys):
    """The build command on a Marian (OPUS-MT) folder converted by convert_marian.py: its own tokenizer's pieces,
    its start token (<pad>), and a corpus token's nearest neighbour is itself."""
    pytest.importorskip("transformers")
    from transformer.convert_marian import convert

    from .marian_fixtures import ENGLISH, GERMAN, sentences, write_hf_marian, write_tokenizer_files

    hf_folder = write_hf_marian(tmp_path / "hf", write_tokenizer_files(tmp_path / "spm"))
    checkpoint = convert(str(hf_folder), tmp_path / "converted")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.en").write_text("\n".join(sentences(ENGLISH, 20, seed=5)) + "\n")
    (corpus / "train.de").write_text("\n".join(sentences(GERMAN, 20, seed=6)) + "\n")
    main(["build", str(checkpoint), str(corpus), str(tmp_path / "atlas"), "--projection", "pca", "--sample", "50"])
    capsys.readouterr()
    sentence = (corpus / "train.en").read_text().splitlines()[4]
    main(["neighbours", str(tmp_path / "atlas"), "--sentence", sentence, "--token", "1", "--layer", "1", "--k", "1"])
    first = json.loads(capsys.readouterr().out)["neighbours"][0]
    # FAISS's float32 |x|^2 + |y|^2 - 2 x.y leaves a residue ~1e-6 |x|^2 for a vector and itself: its root ~1e-3 |x|
    assert (first["sentence"], first["position"], first["distance"]) == (5, 1, pytest.approx(0, abs=1e-2))
