"""Joining the timelines of a warm-started model's stages: epochs renumbered, every map kept under its new epoch."""
import pytest
import torch

from transformer.training.timeline import Timeline, concatenate
from transformer.training.timeline import main as timeline_cli

SENTENCES = ["A dog runs.", "Two cats sleep."]


def stage(losses: list[float], seed: int, sentences=SENTENCES) -> Timeline:
    generator = torch.Generator().manual_seed(seed)
    epochs, maps = [], {}
    for epoch, loss in enumerate(losses, start=1):
        outputs = []
        for index, sentence in enumerate(sentences):
            outputs.append({"text": f"{sentence} @{seed}.{epoch}", "src": ["a", "</s>"], "tgt": ["<s>", "b"],
                            "labels": {"cross": [["<s>", "b"], ["a", "</s>"]]}})
            maps[f"{epoch}/{index}/cross"] = torch.rand(3, 4, 2, 2, generator=generator).half()
        epochs.append({"epoch": epoch, "train_loss": loss, "val_bleu": 30.0 + epoch, "outputs": outputs})
    return Timeline(list(sentences), epochs, maps)


def test_the_later_stage_follows_the_earlier_one():
    earlier, later = stage([3.0, 2.5, 2.2], seed=1), stage([2.1, 2.0], seed=2)
    joined = concatenate(earlier, later)
    assert [e["epoch"] for e in joined.epochs] == [1, 2, 3, 4, 5]
    assert [e["train_loss"] for e in joined.epochs] == [3.0, 2.5, 2.2, 2.1, 2.0]
    assert len(joined.maps) == len(earlier.maps) + len(later.maps)
    for epoch in (1, 2):
        weights, rows, cols = joined.attention(epoch + 3, 1, "cross")
        torch.testing.assert_close(torch.from_numpy(weights), later.maps[f"{epoch}/1/cross"].float())
        assert joined.epochs[epoch + 2]["outputs"][1]["text"] == later.epochs[epoch - 1]["outputs"][1]["text"]
    torch.testing.assert_close(torch.from_numpy(joined.attention(2, 0, "cross")[0]), earlier.maps["2/0/cross"].float())
    assert [e["epoch"] for e in later.epochs] == [1, 2]  # the inputs are left as they were


def test_timelines_of_different_probe_sentences_do_not_join():
    with pytest.raises(ValueError, match="different probe sentences"):
        concatenate(stage([1.0], 1), stage([1.0], 2, sentences=["Ein Hund rennt.", "Zwei Katzen schlafen."]))


def test_the_command_line_prepends_once(tmp_path):
    stage([3.0, 2.5], seed=1).save(tmp_path / "earlier")
    stage([2.1, 2.0, 1.9], seed=2).save(tmp_path / "model")
    timeline_cli(["--checkpoint", str(tmp_path / "model"), "--prepend", str(tmp_path / "earlier")])
    joined = Timeline.load(tmp_path / "model")
    assert [e["train_loss"] for e in joined.epochs] == [3.0, 2.5, 2.1, 2.0, 1.9]
    with pytest.raises(SystemExit, match="already starts with"):
        timeline_cli(["--checkpoint", str(tmp_path / "model"), "--prepend", str(tmp_path / "earlier")])
    with pytest.raises(SystemExit, match="has no timeline.json"):
        timeline_cli(["--checkpoint", str(tmp_path / "model"), "--prepend", str(tmp_path / "nowhere")])
