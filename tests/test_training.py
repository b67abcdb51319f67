import json
import shutil

import pytest
import sacrebleu
import torch

from transformer import Translator
from transformer import evaluate as evaluate_cli
from transformer import train as train_cli
from transformer.corpus.data import read_parallel, token_batches
from transformer.training.averaging import average_state_dicts
from transformer.training.model_card import model_card
from transformer.training.timeline import Timeline
from transformer.training.trainer import TrainingSettings, learning_rate

from .conftest import MULTI30K, SHIPPED

GERMAN_FUNCTION_WORDS = {"ein", "eine", "einer", "einem", "einen", "der", "die", "das", "den", "dem", "mit", "auf",
                         "im", "in", "und", "vor", "an", "sich", "zwei"}


def test_short_training_run_lowers_loss_and_writes_a_usable_checkpoint(corpus_dir, tmp_path, capsys):
    out = tmp_path / "toy"
    train_cli.main(["--data-dir", str(corpus_dir), "--out", str(out), "--vocab-size", "290", "--d-model", "32",
                    "--n-heads", "4", "--n-layers", "1", "--d-ff", "64", "--dropout", "0.0", "--epochs", "6",
                    "--max-tokens", "600", "--warmup", "30", "--lr", "3e-3", "--average", "2", "--threads", "1"])
    metrics = json.loads((out / "metrics.json").read_text())
    losses = [epoch["train_loss"] for epoch in metrics["epochs"]]
    assert len(losses) == 6 and losses[-1] < 0.8 * losses[0]
    assert metrics["epochs"][-1]["val_loss"] < metrics["epochs"][0]["val_loss"]
    assert metrics["data"]["train"]["lines"] == 600
    assert "nrefs:1|case:mixed|eff:no|tok:13a" in metrics["scores"]["val"]["bleu_signature"]
    translator = Translator.from_pretrained(out)
    result = translator.translate("a man rides a red bike .", strategy="beam", beam_size=3)
    assert result.text.strip() and result.tgt_tokens[-1] == "</s>"
    assert "wrote" in capsys.readouterr().out
    continued = tmp_path / "continued"
    train_cli.main(["--data-dir", str(corpus_dir), "--init-from", str(out), "--out", str(continued), "--epochs", "1",
                    "--max-tokens", "600", "--warmup", "30", "--lr", "3e-3", "--average", "1", "--threads", "1",
                    "--dropout", "0.25", "--attention-dropout", "0.05"])
    resumed = json.loads((continued / "metrics.json").read_text())
    # what is recorded for other machines names the folders without this machine's absolute paths: the temporary
    # folders lie outside the working directory, so each is named by its last two parts
    shown_out, shown_corpus = f"{out.parent.name}/{out.name}", f"{corpus_dir.parent.name}/{corpus_dir.name}"
    assert resumed["training"]["init_from"] == shown_out
    assert str(tmp_path) not in json.dumps(resumed) and str(corpus_dir) not in json.dumps(resumed)
    assert f"--init-from {shown_out}" in resumed["training"]["command"]
    assert f"--data-dir {shown_corpus}" in resumed["training"]["invocation"]
    # a warm start keeps the checkpoint's shape but trains with the dropouts asked for
    assert resumed["model"] == {**metrics["model"], "dropout": 0.25, "attention_dropout": 0.05}
    assert resumed["epochs"][0]["train_loss"] < losses[1]  # starts from the trained weights, not from scratch
    # its timeline says so (and that it read a corpus other than the default one)
    assert Timeline.load(continued).stages == [{"first_epoch": 1,
                                                "label": f"a warm start from {shown_out}, trained on {shown_corpus}"}]
    card = model_card(metrics, "toy")
    assert (
        f"| val | **{metrics['scores']['val']['bleu']}** |" in card
        and "Reproduce: `python -m transformer.train" in card
    )
    warm_card = model_card(resumed, "continued")
    assert f"a warm start from `{shown_out}`: `python -m transformer.train" in warm_card and "--init-from" in warm_card


def test_training_stops_within_its_time_budget(corpus_dir, tmp_path, capsys):
    # a budget that ends the run inside its first epoch is a clean stop: main returns (exit status 0), the state
    # is saved for --resume and no checkpoint is claimed
    out = tmp_path / "x"
    train_cli.main(["--data-dir", str(corpus_dir), "--out", str(out), "--vocab-size", "290",
                    "--d-model", "16", "--n-heads", "2", "--n-layers", "1", "--d-ff", "16", "--max-minutes", "0"])
    assert "first epoch has not ended, so no checkpoint was written" in capsys.readouterr().out
    assert (out / "resume" / "state.json").is_file() and not (out / "model.safetensors").exists()


def test_corpus_reader_rejects_files_of_different_lengths(tmp_path):
    (tmp_path / "train.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "train.de").write_text("eins\nzwei\n")
    with pytest.raises(ValueError, match=r"train\.en has 3 lines but .*train\.de has 2"):
        read_parallel(tmp_path, "train", "en", "de")


def test_averaging_yields_the_mean_of_the_weights():
    states = [{"w": torch.full((2, 3), float(i)), "b": torch.tensor([i, -i], dtype=torch.float32)} for i in (1, 2, 6)]
    averaged = average_state_dicts(states)
    # means of small integers are exact in float32: assert_close's defaults only guard the dtype and shape
    torch.testing.assert_close(averaged["w"], torch.full((2, 3), 3.0))
    torch.testing.assert_close(averaged["b"], torch.tensor([3.0, -3.0]))
    with pytest.raises(ValueError, match="different tensors"):
        average_state_dicts([{"w": torch.zeros(1)}, {"v": torch.zeros(1)}])


def test_token_batches_cover_every_example_once_within_budget():
    lengths = [3, 17, 5, 9, 30, 2, 8, 8, 12, 25] * 20
    batches = token_batches(lengths, max_tokens=60, shuffle=True, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or max(lengths[i] for i in batch) * len(batch) <= 60


def test_learning_rate_warms_up_then_decays_as_inverse_square_root():
    settings = TrainingSettings(lr=1e-3, warmup=100)
    # a closed formula in float64: approx's 1e-6 relative covers its rounding
    assert learning_rate(50, settings) == pytest.approx(5e-4)
    assert learning_rate(100, settings) == pytest.approx(1e-3)
    assert learning_rate(400, settings) == pytest.approx(5e-4)


needs_shipped = pytest.mark.skipif(
    not (SHIPPED / "config.json").is_file(), reason="no shipped checkpoint at checkpoints/en-de"
)
needs_multi30k = pytest.mark.skipif(not (MULTI30K / "val.en").is_file(),
                                    reason="Multi30k not found at ../shared/data/multi30k (CI has it)")


@needs_shipped
@needs_multi30k
def test_shipped_checkpoint_translates_val_sentences_to_german():
    translator = Translator.from_pretrained(SHIPPED)
    sources = (MULTI30K / "val.en").read_text().splitlines()[:24]
    results = translator.translate_batch(sources, strategy="greedy")
    assert all(r.text.strip() for r in results)
    german = sum(bool(GERMAN_FUNCTION_WORDS & set(r.text.lower().split())) for r in results)
    assert german >= 20


@needs_shipped
@needs_multi30k
def test_evaluate_cli_scores_a_split(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "data"
    folder.mkdir()
    for lang in ("en", "de"):
        (folder / f"val.{lang}").write_text("\n".join((MULTI30K / f"val.{lang}").read_text().splitlines()[:40]) + "\n")
    checkpoint = tmp_path / "ckpt"
    shutil.copytree(SHIPPED, checkpoint)
    evaluate_cli.main(["--checkpoint", str(checkpoint), "--data-dir", str(folder), "--split", "val", "--json",
                       "--out", str(tmp_path / "hyp.txt"), "--update-metrics"])
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == 40 and result["bleu"] > 15
    hypotheses = (tmp_path / "hyp.txt").read_text().splitlines()
    references = (folder / "val.de").read_text().splitlines()
    # independent scoring of the same discrete hypotheses, rounded alike: exact
    assert result["bleu"] == round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2)
    assert json.loads((checkpoint / "metrics.json").read_text())["scores"]["val"]["bleu"] == result["bleu"]


def test_training_and_evaluation_look_where_the_download_writes(tmp_path, monkeypatch):
    from transformer.corpus import data

    if (MULTI30K / "train.en").is_file():  # ../shared/data/multi30k beside the repository comes first
        assert data.default_data_dir() == MULTI30K
    monkeypatch.setattr(data, "SHARED_MULTI30K", tmp_path / "absent")
    monkeypatch.setattr(data, "LOCAL_MULTI30K", tmp_path / "local")
    assert data.default_data_dir() is None
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "train.en").write_text("a\n")
    assert data.default_data_dir() == tmp_path / "local"
    downloaded = []
    monkeypatch.setattr(data, "download_multi30k", lambda dest, langs: downloaded.append(dest) or [])
    data.main(["download"])
    assert downloaded == [str(tmp_path / "local")]  # the download's default destination is that folder


def test_train_help_keeps_its_examples_apart_and_out_of_the_shipped_checkpoints(capsys):
    with pytest.raises(SystemExit):
        train_cli.main(["--help"])
    text = capsys.readouterr().out
    examples = [line.strip() for line in text.splitlines() if line.strip().startswith("python -m transformer.train")]
    assert len(examples) >= 2  # one per line, not run together into a paragraph
    assert not any("checkpoints/" in line for line in text.splitlines() if "transformer.train" in line)
    assert "(default: None)" not in text and "(default: 0.3)" in text  # defaults shown where there is one
