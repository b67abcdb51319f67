"""python -m transformer.features (transformer/features/cli.py): `train` writes a dictionary folder of exactly the
file format's tensors and config, with metrics recomputed here; `steer` and `explain` print what the package's
functions give for the same dictionary; bad settings, folders and files end in one line naming them (exit 2)."""
import json
import re

import pytest
import torch
from safetensors.torch import load_file

from transformer.features import load_dictionary, measure
from transformer.features.cli import main
from transformer.features.gather import gather_activations
from transformer.features.steering import Edit, causes, steer

from .conftest import synthetic_pairs

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
