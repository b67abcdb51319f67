"""Choosing the beam length penalty on val: the recorded BLEU per value is what sacreBLEU gives for that
value's translations made one sentence at a time, the choice is the best of them, and evaluate then uses it."""
import json
import re
import shutil

import pytest
import sacrebleu

from transformer import Translator
from transformer import evaluate as evaluate_cli
from transformer import train as train_cli
from transformer import tune_length_penalty as tune_cli
from transformer.decoding.strategies import SettingError
from transformer.training.tune_length_penalty import best_value, parse_values


@pytest.fixture(scope="module")
def checkpoint(corpus_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("tune") / "toy"
    train_cli.main(["--data-dir", str(corpus_dir), "--out", str(out), "--vocab-size", "290", "--d-model", "32",
                    "--n-heads", "4", "--n-layers", "1", "--d-ff", "64", "--dropout", "0.0", "--attention-dropout", "0",
                    "--epochs", "3", "--max-tokens", "600", "--warmup", "30", "--lr", "3e-3", "--average", "1",
                    "--threads", "1"])
    return out


def test_the_sweep_records_each_values_bleu_and_keeps_the_best(checkpoint, corpus_dir, capsys):
    assert "test_2016_flickr" in json.loads((checkpoint / "metrics.json").read_text())["scores"]
    tune_cli.main(
        ["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), "--values", "0,2", "--beam-size", "3"]
    )
    metrics = json.loads((checkpoint / "metrics.json").read_text())
    sweep = metrics["length_penalty_sweep"]

    translator = Translator.from_pretrained(checkpoint)
    sources = (corpus_dir / "val.en").read_text().splitlines()
    references = (corpus_dir / "val.de").read_text().splitlines()
    for value in (0.0, 2.0):
        one_by_one = [translator.translate(s, strategy="beam", beam_size=3, length_penalty=value).text for s in sources]
        # BLEU of discrete translations, rounded to 2 decimals alike: exact, here and below
        assert sweep["bleu"][f"{value:g}"] == round(sacrebleu.corpus_bleu(one_by_one, [references]).score, 2)
    best = max(sweep["bleu"].values())
    assert sweep["bleu"][f"{sweep['chosen']:g}"] == best and sweep["split"] == "val"
    assert metrics["decoding"] == {"strategy": "beam", "beam_size": 3, "length_penalty": sweep["chosen"]}
    assert metrics["scores"]["val"]["bleu"] == best
    # the test score was decoded with the old setting: removed, and the command to score it again is printed
    assert "test_2016_flickr" not in metrics["scores"]
    assert "--split test_2016_flickr --update-metrics" in capsys.readouterr().out

    evaluate_cli.main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), "--split", "val", "--json"])
    evaluated = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert evaluated["length_penalty"] == sweep["chosen"] and evaluated["beam_size"] == 3
    assert evaluated["bleu"] == best
    # a setting given on the command line wins over the recorded one; the others stay as recorded
    evaluate_cli.main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), "--split", "val", "--json",
                       "--length-penalty", "0"])
    overridden = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert overridden["length_penalty"] == 0 and overridden["beam_size"] == 3
    assert overridden["bleu"] == sweep["bleu"]["0"]
    # another strategy than the recorded one decodes with its own defaults, not the beam's tuned values
    assert translator.recorded_decoding("greedy") == ("greedy", {})


@pytest.mark.parametrize("arguments, message", [
    (["--split", "test_2016_flickr"], "never on a test split"),
    (["--values", "0.6,2.5"], "length_penalty must be in [0.0, 2.0]"),
    (["--values", "0.6,high"], "comma-separated numbers"),
    (["--values", "1,1.0"], "repeats a value"),
    (["--values", ","], "at least one"),
    (["--beam-size", "0"], "beam_size must be in [1, 8]"),
    (["--batch-size", "0"], "argument --batch-size: must be at least 1"),
])
def test_bad_settings_are_refused_before_any_decoding(checkpoint, corpus_dir, arguments, message, capsys):
    before = (checkpoint / "metrics.json").read_text()
    with pytest.raises(SystemExit):
        tune_cli.main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), *arguments])
    assert message in capsys.readouterr().err
    assert (checkpoint / "metrics.json").read_text() == before  # nothing recorded


def test_a_folder_without_metrics_is_refused(tmp_path, corpus_dir, capsys):
    with pytest.raises(SystemExit):
        tune_cli.main(["--checkpoint", str(tmp_path), "--data-dir", str(corpus_dir)])
    assert "no metrics.json there" in capsys.readouterr().err


def test_ties_go_to_the_value_listed_first():  # the keys given come back, never computed: exact
    assert best_value({1.0: 30.0, 0.6: 30.0, 2.0: 29.0}) == 1.0
    assert best_value({0.6: 30.0, 1.0: 31.5}) == 1.0
    assert parse_values(" 0.6, 1.5 ") == [0.6, 1.5]
    with pytest.raises(SettingError):
        parse_values("-0.1")


def test_a_mixed_models_scores_are_named_by_corpus_and_the_rescore_command_names_the_folder(
        checkpoint, corpus_dir, tmp_path, capsys):
    """A model trained on a mix names each corpus's test score CORPUS/SPLIT (as training does): evaluate's
    --update-metrics must not let two corpora's `test` overwrite each other, and tune's rescore hint must say
    which folder the split is in."""
    mixed = tmp_path / "mixed"
    shutil.copytree(checkpoint, mixed)
    metrics = json.loads((mixed / "metrics.json").read_text())
    metrics["data"]["mix"] = {"corpora": [{"name": corpus_dir.name, "folder": str(corpus_dir), "repeat": 1}]}
    (mixed / "metrics.json").write_text(json.dumps(metrics))

    evaluate_cli.main(["--checkpoint", str(mixed), "--data-dir", str(corpus_dir), "--split", "test_2016_flickr",
                       "--update-metrics", "--json"])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    scores = json.loads((mixed / "metrics.json").read_text())["scores"]
    assert scores[f"{corpus_dir.name}/test_2016_flickr"]["bleu"] == printed["bleu"]

    tune_cli.main(["--checkpoint", str(mixed), "--data-dir", str(corpus_dir), "--values", "0,1"])
    assert f"--data-dir {corpus_dir} --split test_2016_flickr --update-metrics" in capsys.readouterr().out
    assert set(json.loads((mixed / "metrics.json").read_text())["scores"]) == {f"{corpus_dir.name}/val"}


@pytest.mark.parametrize("arguments, message", [
    (["--strategy", "greedy", "--beam-size", "3"], r"--beam-size: not a setting of strategy 'greedy'"),
    (["--strategy", "sample", "--temperature", "9"], r"temperature must be in \[0.05, 5.0\]"),
])
def test_evaluate_refuses_a_flag_the_chosen_strategy_does_not_have(checkpoint, corpus_dir, arguments, message, capsys):
    with pytest.raises(SystemExit) as caught:
        evaluate_cli.main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), *arguments])
    assert caught.value.code == 2
    assert re.search(message, capsys.readouterr().err)
