"""A bad corpus is one line that names the file, exit code 2, no traceback, and nothing written to --out; and a
mixed training folder (transformer.data mix) keeps its recipe for training, metrics.json and the per-corpus scores."""
import json
import shutil

import pytest

from transformer import train as train_cli
from transformer.corpus.data import main as data_cli
from transformer.training.model_card import model_card

from .conftest import write_corpus

TINY = ["--vocab-size", "290", "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--d-ff", "16",
        "--threads", "1", "--max-tokens", "600"]


def unequal_lines(folder):
    (folder / "train.de").write_text("eins\nzwei\n")
    return folder / "train.en", "has 600 lines but"


def missing_split(folder):
    (folder / "val.de").unlink()
    return folder / "val.de", "corpus file is missing"


def empty_split(folder):
    (folder / "val.en").write_text("")
    return folder / "val.en", "is empty"


def not_utf8(folder):
    (folder / "train.de").write_bytes("ein hund .\nein mann \xe4".encode("latin-1") + b"\n")
    return folder / "train.de", "line 2 holds bytes that are not UTF-8"


def folder_for_a_file(folder):
    (folder / "val.en").unlink()
    (folder / "val.en").mkdir()
    return folder / "val.en", "is a folder"


def missing_test_split(folder):
    (folder / "test_2016_flickr.de").unlink()
    return folder / "test_2016_flickr.de", "corpus file is missing"


@pytest.mark.parametrize("spoil", [unequal_lines, missing_split, empty_split, not_utf8, folder_for_a_file,
                                   missing_test_split])
def test_a_bad_corpus_stops_training_with_one_line_naming_the_file(spoil, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus")
    bad_file, complaint = spoil(corpus)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        train_cli.main(["--data-dir", str(corpus), "--out", str(out), *TINY])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad_file) in err and complaint in err and "Traceback" not in err
    assert not out.exists()


def test_a_bad_corpus_stops_mixing_before_anything_is_written(tmp_path, capsys):
    good, bad = write_corpus(tmp_path / "good"), write_corpus(tmp_path / "bad")
    missing_split(bad)
    with pytest.raises(SystemExit) as stopped:
        data_cli(["mix", str(good), str(bad), "--out", str(tmp_path / "mixed")])
    assert stopped.value.code != 0 and str(bad / "val.de") in capsys.readouterr().err
    assert not (tmp_path / "mixed").exists()


@pytest.mark.parametrize("flags, complaint", [(["--repeat", "1"], "give one per folder"),
                                              (["--repeat", "1", "0"], "--repeat counts must be at least 1"),
                                              (["--langs", "en"], "--langs needs two languages")])
def test_mix_rejects_bad_settings_by_name(flags, complaint, tmp_path, capsys):
    a, b = write_corpus(tmp_path / "a"), write_corpus(tmp_path / "b")
    with pytest.raises(SystemExit) as stopped:
        data_cli(["mix", str(a), str(b), "--out", str(tmp_path / "mixed"), *flags])
    assert stopped.value.code == 2 and complaint in capsys.readouterr().err
    assert not (tmp_path / "mixed").exists()


def test_a_missing_tokenizer_is_named(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus")
    with pytest.raises(SystemExit) as stopped:
        train_cli.main(["--data-dir", str(corpus), "--out", str(tmp_path / "run"), "--tokenizer",
                        str(tmp_path / "none.model"), *TINY])
    assert stopped.value.code == 2 and "--tokenizer" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_training_on_a_mix_reports_each_corpus(tmp_path, capsys):
    # two corpora with their own test splits; the second is repeated twice in the training split
    first = write_corpus(tmp_path / "tatoeba", sizes=(("train", 300), ("val", 30), ("test", 10)))
    second = write_corpus(tmp_path / "second", sizes=(("train", 200), ("val", 20), ("test_2016_flickr", 10)))
    mixed = tmp_path / "mixed"
    data_cli(["mix", str(first), str(second), "--out", str(mixed), "--repeat", "1", "2"])
    train_lines = (mixed / "train.en").read_text().splitlines()
    second_train = (second / "train.en").read_text().splitlines()
    assert train_lines == (first / "train.en").read_text().splitlines() + second_train + second_train
    assert (mixed / "val.de").read_text().splitlines() == ((first / "val.de").read_text().splitlines()
                                                          + (second / "val.de").read_text().splitlines())
    assert not list(mixed.glob("test*"))  # tests stay in their own folders
    out = tmp_path / "run"
    train_cli.main(["--data-dir", str(mixed), "--out", str(out), "--epochs", "1", *TINY])
    metrics = json.loads((out / "metrics.json").read_text())
    recipe = metrics["data"]["mix"]["corpora"]
    assert [(c["name"], c["repeat"], c["val"], c["tests"]) for c in recipe] == [
        ("tatoeba", 1, [0, 30], ["test"]), ("second", 2, [30, 50], ["test_2016_flickr"])]
    assert set(metrics["scores"]) == {"val", "tatoeba/test", "second/test_2016_flickr"}
    assert metrics["scores"]["tatoeba/test"]["sentences"] == 10
    assert set(metrics["epochs"][0]["val_bleu_by_corpus"]) == {"tatoeba", "second"}
    # the recorded command redoes the run from the same mixed folder, named without this machine's path (it lies
    # outside the working directory: its last two parts), as are the corpora the mix was made from
    assert f"--data-dir {mixed.parent.name}/{mixed.name}" in metrics["training"]["command"]
    assert str(tmp_path) not in json.dumps(metrics)
    # the model card names both corpora, with the license and credit Tatoeba asks for
    card = model_card(metrics, "run")
    assert "Tatoeba English–German" in card and "CC-BY 2.0" in card and "tatoeba.org" in card
    assert "300 training pairs;" in card and "second: 200 training pairs, repeated 2×" in card
    shutil.rmtree(out)
