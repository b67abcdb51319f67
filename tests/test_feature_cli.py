"""python -m transformer.features (transformer/features/cli.py): `train` writes a dictionary folder of exactly the
file format's tensors and config, with metrics recomputed here; `steer` and `explain` print what the package's
functions give for the same dictionary; `top --piece` on the shipped dictionaries prints a piece's latents as their
catalogue's arrays hold them, and a piece of the other side (docs/features.md's `--piece Hund` at the English encoder)
or of no side is one line naming the side and the point; bad settings, folders and files end in one line naming them
(exit 2)."""
import json
import os
import re
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from transformer.features import load_dictionary, measure
from transformer.features.catalogue import load_catalogue
from transformer.features.cli import main
from transformer.features.gather import gather_activations
from transformer.features.steering import Edit, causes, steer
from transformer.tokenizer import Tokenizer

from .conftest import SHIPPED, synthetic_pairs

POINT = "encoder_layers.2.output"
SENTENCE, TARGET = synthetic_pairs(1, seed=11)[0]


def cli(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    try:
        main(list(map(str, argv)))
        status = 0
    except SystemExit as end:
        status = end.code
    captured = capsys.readouterr()
    bar = re.compile(r"^\S.*: +\d+%\|")  # tqdm's progress lines, drawn before a failure
    return status, captured.out, "\n".join(line for line in captured.err.splitlines() if line and not bar.match(line))


@pytest.fixture(scope="module")
def trained(random_translator, corpus_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("features") / "dictionary"
    argv = [random_translator.source, corpus_dir, out, "--point", POINT, "--n", 64, "--k", 4, "--sentences", 300,
            "--held-out", 200, "--val-sentences", 20, "--epochs", 2, "--batch-size", 256, "--threads", 1]
    main(list(map(str, ["train", *argv])))
    return out


def test_train_writes_the_file_format_with_metrics_that_hold(trained, random_translator, corpus_dir):
    tensors = load_file(trained / "dictionary.safetensors")
    d_model = random_translator.model.config.d_model
    assert {name: (tuple(t.shape), t.dtype) for name, t in tensors.items()} == {
        "W_enc": ((d_model, 64), torch.float32), "b_enc": ((64,), torch.float32),
        "W_dec": ((64, d_model), torch.float32), "b_dec": ((d_model,), torch.float32)}
    config = json.loads((trained / "config.json").read_text())
    assert (config["point"], config["k"], config["n"], config["sentences"]) == (POINT, 4, 64, 300)
    # the held-out metrics, recomputed: pairs 300-499 of train, gathered again and measured by hand here
    sources = (corpus_dir / "train.en").read_text().splitlines()[300:500]
    vectors = gather_activations(random_translator, POINT, sources).vectors
    saved = load_dictionary(trained)
    with torch.no_grad():
        rebuilt = saved.dictionary(vectors).reconstruction.double()
    x = vectors.double()
    fvu = float(((x - rebuilt) ** 2).sum() / ((x - x.mean(0)) ** 2).sum())
    assert config["metrics"]["fvu"] == pytest.approx(fvu, rel=1e-6)
    assert config["metrics"]["tokens"] == len(vectors) == measure(saved.dictionary, vectors).tokens
    assert 0.0 <= config["metrics"]["greedy_identical"] <= 1.0 and config["metrics"]["val_sentences"] == 20


def test_steer_and_explain_print_what_the_package_gives(trained, random_translator, capsys):
    saved = load_dictionary(trained)
    status, out, err = cli(capsys, "steer", trained, "--checkpoint", random_translator.source, "--sentence", SENTENCE,
                           "--latent", 3, "--scale", 4, "--positions", "1,2")
    assert status == 0, err
    printed = json.loads(out)
    want = steer(random_translator, saved, SENTENCE, [Edit(3, 4.0, (0, 1))], strategy="greedy")
    assert (printed["before"], printed["after"]) == (want.before, want.after)
    status, out, err = cli(capsys, "explain", trained, "--checkpoint", random_translator.source, "--sentence",
                           SENTENCE, "--target", TARGET, "--piece", 2, "--exact", 3)
    assert status == 0, err
    printed = json.loads(out)
    found = causes(random_translator, saved, SENTENCE, TARGET, 1, exact=3)
    assert [(c["latent"], c["exact"]) for c in printed["causes"]] == [(c.latent, c.exact) for c in found[:10]]


@pytest.mark.parametrize("argv, named", [
    (["--n", 8, "--k", 9], "k must be at most n"),
    (["--point", "encoder_layers.9.output"], "point"),
    (["--k", 0], "--k"),
    (["--sentences", 10_000], "sentences"),
])
def test_bad_train_settings_are_named_in_one_line(argv, named, random_translator, corpus_dir, tmp_path, capsys):
    base = {"--point": POINT, "--n": 16, "--k": 2, "--sentences": 50, "--held-out": 20, "--val-sentences": 5}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value
    flags = [str(part) for pair in base.items() for part in pair]
    status, _, err = cli(capsys, "train", random_translator.source, corpus_dir, tmp_path / "out", *flags)
    assert status == 2 and len(err.splitlines()) == 1 and named in err, err
    assert not (tmp_path / "out" / "dictionary.safetensors").exists()


def test_an_existing_folder_a_corrupt_dictionary_and_a_bad_latent_are_named(trained, random_translator, corpus_dir,
                                                                           tmp_path, capsys):
    status, _, err = cli(capsys, "train", random_translator.source, corpus_dir, trained, "--point", POINT)
    assert status == 2 and str(trained) in err and len(err.splitlines()) == 1, err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((trained / "config.json").read_text())
    (broken / "dictionary.safetensors").write_bytes((trained / "dictionary.safetensors").read_bytes()[:100])
    status, _, err = cli(capsys, "steer", broken, "--checkpoint", random_translator.source, "--sentence", SENTENCE,
                         "--latent", 0)
    assert status == 2 and "dictionary.safetensors" in err and len(err.splitlines()) == 1, err
    status, _, err = cli(capsys, "steer", trained, "--checkpoint", random_translator.source, "--sentence", SENTENCE,
                         "--latent", 64)
    assert status == 2 and "latent" in err and len(err.splitlines()) == 1, err
    status, _, err = cli(capsys, "explain", trained, "--checkpoint", random_translator.source, "--sentence", SENTENCE,
                         "--target", TARGET, "--piece", 99)
    assert status == 2 and "--piece must be in [1, " in err and len(err.splitlines()) == 1, err


# ---- top --piece on the shipped en-de dictionaries: an encoder point reads English pieces, a decoder point German


def by_hand(folder, piece_id: int, top: int) -> list[tuple[int, float]]:
    """(latent, strongest activation) over the catalogue's kept contexts on `piece_id`, read straight from its arrays,
    strongest first (ties: the lower latent)."""
    catalogue = load_catalogue(folder)
    hits = {}
    for latent in range(catalogue.n):
        on = [float(a) for s, p, a in zip(catalogue.sentence[latent], catalogue.piece[latent],
                                          catalogue.activation[latent]) if s >= 0 and p == piece_id]
        if on:
            hits[latent] = max(on)
    return sorted(hits.items(), key=lambda hit: (-hit[1], hit[0]))[:top]


@pytest.mark.parametrize("point, piece", [("encoder_layers.3.output", "dog"), ("decoder_layers.3.output", "Hund")])
def test_top_piece_prints_the_latents_the_catalogue_holds_on_it(point, piece, capsys):
    folder = SHIPPED / "features" / point
    want = by_hand(folder, Tokenizer.load(SHIPPED / "spm.model").piece_to_id("▁" + piece), 5)
    status, out, err = cli(capsys, "top", folder, "--piece", piece, "--contexts", 5)
    assert status == 0, err
    printed = json.loads(out)
    assert len(want) == 5 and [(row["latent"], row["activation"]) for row in printed["latents"]] == [
        (latent, round(value, 4)) for latent, value in want]


@pytest.mark.parametrize("point, piece, side, said", [
    # docs/features.md's example before: Hund is in the joint vocabulary, but never on the English side
    ("encoder_layers.3.output", "Hund", "source (en)", "is on none of the contexts"),
    ("decoder_layers.3.output", "▁dog", "target (de)", "is on none of the contexts"),
    ("encoder_layers.3.output", "Qzxqv", "source (en)", "is not a piece of the source (en) side"),
])
def test_top_piece_of_the_other_side_or_of_none_is_one_line_naming_the_side_and_the_point(point, piece, side, said,
                                                                                         capsys):
    folder = SHIPPED / "features" / point
    tokenizer = Tokenizer.load(SHIPPED / "spm.model")
    ids = {tokenizer.piece_to_id(form) for form in (piece, "▁" + piece.lstrip("▁"))} - {tokenizer.unk_id}
    assert not np.isin(load_catalogue(folder).piece, list(ids)).any()  # no kept context is on it
    status, out, err = cli(capsys, "top", folder, "--piece", piece)
    assert status == 2 and out == "" and len(err.splitlines()) == 1, (out, err)
    assert f"--piece {piece!r}" in err and said in err and f"{side} side" in err and point in err, err


# ---- checked before the work: the outputs can be written and the inputs are there, before any gathering


@pytest.fixture
def no_gathering(monkeypatch):
    """Gathering (the first costly step of `train` and of `top --build`) fails the test: a bad path must be named
    before it."""
    def gathered(*args, **kwargs):
        raise AssertionError("the corpus was gathered before the paths were checked")

    monkeypatch.setattr("transformer.features.cli.build_catalogue", gathered)
    monkeypatch.setattr("transformer.features.build.gather_activations", gathered)


def read_only(folder) -> None:
    if os.geteuid() == 0:  # root writes into a folder whatever its mode says: no read-only folder to test with
        pytest.skip("running as root, where chmod does not stop writes (the cases below without chmod still run)")
    folder.chmod(0o555)


@pytest.mark.parametrize("how, said", [("read-only", "is read-only"), ("a folder at the catalogue's path",
                                                                       "is a folder")])
def test_top_build_names_an_unwritable_catalogue_before_gathering(how, said, trained, random_translator, corpus_dir,
                                                                   tmp_path, capsys, no_gathering):
    folder = tmp_path / "dictionary"
    shutil.copytree(trained, folder)
    (folder / "catalogue.npz").unlink(missing_ok=True)
    if how == "read-only":
        read_only(folder)
    else:
        (folder / "catalogue.npz").mkdir()
    try:
        status, _, err = cli(capsys, "top", folder, "--checkpoint", random_translator.source, "--build", "--corpus",
                             corpus_dir)
    finally:
        folder.chmod(0o755)
    assert status == 2 and len(err.splitlines()) == 1 and "catalogue.npz" in err and said in err, err


def test_top_build_names_a_missing_corpus_before_loading(trained, random_translator, tmp_path, capsys, no_gathering):
    status, _, err = cli(capsys, "top", trained, "--checkpoint", random_translator.source, "--build", "--corpus",
                         tmp_path / "no-corpus")
    assert status == 2 and len(err.splitlines()) == 1 and "no-corpus does not exist" in err, err


def without_val(corpus_dir, tmp_path):
    corpus = tmp_path / "corpus"
    shutil.copytree(corpus_dir, corpus)
    for path in corpus.glob("val.*"):
        path.unlink()
    return corpus


@pytest.mark.parametrize("case, said", [
    ("no val split", "val."), ("more val sentences than val has", "val_sentences must be in [1, "),
    ("no corpus folder", "does not exist"), ("out under a file", "is a file, not a folder"),
    ("out in a read-only folder", "is read-only"),
])
def test_train_names_a_missing_input_or_unwritable_output_before_gathering(case, said, random_translator, corpus_dir,
                                                                           tmp_path, capsys, no_gathering):
    corpus, out, extra = corpus_dir, tmp_path / "parent" / "out", []
    out.parent.mkdir()
    if case == "no val split":
        corpus = without_val(corpus_dir, tmp_path)
    elif case == "more val sentences than val has":
        extra = ["--val-sentences", 10**6]
    elif case == "no corpus folder":
        corpus = tmp_path / "no-corpus"
    elif case == "out under a file":
        (tmp_path / "notes").write_text("a file")
        out = tmp_path / "notes" / "out"
    else:
        read_only(out.parent)
    try:
        status, _, err = cli(capsys, "train", random_translator.source, corpus, out, "--point", POINT, "--n", 16, "--k",
                             2, "--sentences", 50, "--held-out", 20, *extra)
    finally:
        out.parent.chmod(0o755) if out.parent.is_dir() else None
    assert status == 2 and len(err.splitlines()) == 1 and said in err, err
    assert not out.exists()
