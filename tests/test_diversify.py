"""transformer.diversify: the grown training split is the original, then the sources with the forward model's
translations, then the back-translations with the original targets; other splits are copied unchanged."""
import json

import pytest
import torch

from transformer import Tokenizer, Transformer, Translator
from transformer import train as train_cli
from transformer.checkpoint import save_checkpoint
from transformer.corpus.data import read_lines
from transformer.training.diversify import PROVENANCE_FILE, main
from transformer.training.model_card import model_card

from .conftest import tiny_config, write_corpus


def random_checkpoint(folder, tokenizer_file, src: str, tgt: str, seed: int):
    torch.manual_seed(seed)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    # an untrained model says nothing useful but decodes to max_len: short, so the test stays fast
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, d_model=32, max_len=24))
    return save_checkpoint(folder, model, tokenizer_file, extra_config={"languages": {"src": src, "tgt": tgt}})


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("small-corpus"), (("train", 30), ("val", 5), ("test_2016_flickr", 5)))


@pytest.fixture(scope="module")
def models(tokenizer_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("diversify-models")
    return (random_checkpoint(root / "en-de", tokenizer_file, "en", "de", seed=1),
            random_checkpoint(root / "de-en", tokenizer_file, "de", "en", seed=2))


def test_training_split_grows_by_forward_and_back_translation(models, small_corpus, tmp_path, capsys):
    forward, backward = models
    out = tmp_path / "diversified"
    main(["--forward", str(forward), "--backward", str(backward), "--out", str(out), "--data-dir", str(small_corpus),
          "--forward-strategy", "greedy", "--batch-size", "1"])
    source, target = read_lines(small_corpus / "train.en"), read_lines(small_corpus / "train.de")
    grown_source, grown_target = read_lines(out / "train.en"), read_lines(out / "train.de")
    n = len(source)
    assert len(grown_source) == len(grown_target) == 3 * n
    assert grown_source[:n] == source and grown_target[:n] == target
    assert grown_source[n : 2 * n] == source and grown_target[2 * n :] == target
    # one sentence at a time, outside the batching that diversify uses
    to_german, to_english = Translator.from_pretrained(forward), Translator.from_pretrained(backward)
    for i in range(n):
        assert grown_target[n + i] == to_german.translate(source[i], strategy="greedy").text
        assert grown_source[2 * n + i] == to_english.translate(target[i], strategy="greedy").text
    for split in ("val", "test_2016_flickr"):
        for language in ("en", "de"):
            assert (out / f"{split}.{language}").read_bytes() == (small_corpus / f"{split}.{language}").read_bytes()
    record = json.loads((out / PROVENANCE_FILE).read_text())
    assert record["train_lines"] == {"original": n, "forward_translated": n, "back_translated": n, "total": 3 * n}
    assert record["forward"]["strategy"] == record["backward"]["strategy"] == "greedy"
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["total"] == 3 * n


@pytest.mark.parametrize("change, message", [
    ({"--backward": "forward"}, "the backward model must translate de→en"),
    ({"--batch-size": "0"}, "argument --batch-size: must be at least 1"),
    ({"--out": "data"}, "--out must differ from --data-dir"),
    ({"--forward-strategy": "sample"}, "invalid choice"),
])
def test_bad_settings_are_refused_and_nothing_is_written(models, small_corpus, tmp_path, capsys, change, message):
    forward, backward = models
    arguments = {"--forward": str(forward), "--backward": str(backward), "--out": str(tmp_path / "out"),
                 "--data-dir": str(small_corpus)}
    original = (small_corpus / "train.en").read_bytes()
    for flag, value in change.items():
        arguments[flag] = {"forward": str(forward), "data": str(small_corpus)}.get(value, value)
    with pytest.raises(SystemExit) as stopped:
        main([word for pair in arguments.items() for word in pair])
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    assert (small_corpus / "train.en").read_bytes() == original


def test_an_existing_training_split_is_not_overwritten(models, small_corpus, tmp_path, capsys):
    forward, backward = models
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.de").write_text("kept\n")
    with pytest.raises(SystemExit):
        main(
            ["--forward", str(forward), "--backward", str(backward), "--out", str(out), "--data-dir", str(small_corpus)]
        )
    assert "already holds a training split" in capsys.readouterr().err
    assert (out / "train.de").read_text() == "kept\n"


def test_a_run_on_the_grown_split_records_how_it_was_grown(models, small_corpus, tmp_path):
    forward, backward = models
    grown = tmp_path / "grown"
    main(["--forward", str(forward), "--backward", str(backward), "--out", str(grown), "--data-dir", str(small_corpus),
          "--forward-strategy", "greedy"])
    out = tmp_path / "run"
    train_cli.main(["--data-dir", str(grown), "--init-from", str(forward), "--out", str(out), "--epochs", "1",
                    "--max-tokens", "400", "--threads", "1", "--beam-size", "1"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["data"]["train"]["lines"] == 3 * len(read_lines(small_corpus / "train.en"))
    assert metrics["data"]["diversified"] == json.loads((grown / PROVENANCE_FILE).read_text())
    # recorded without this machine's paths: the temporary folders lie outside the working directory, so each is
    # named by its last two parts
    assert f"--data-dir {grown.parent.name}/{grown.name}" in metrics["training"]["command"]
    assert str(tmp_path) not in json.dumps(metrics)
    card = model_card(metrics, "run")
    assert f"the {len(read_lines(small_corpus / 'train.en'))} original pairs" in card
    shown_backward = f"{backward.parent.name}/{backward.name}"
    assert f"back-translated by `{shown_backward}` (greedy), built by `transformer.diversify`" in card
