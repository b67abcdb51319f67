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
        # the same float16 maps, copied and widened alike: equal to the bit
        torch.testing.assert_close(torch.from_numpy(weights), later.maps[f"{epoch}/1/cross"].float(), rtol=0, atol=0)
        assert joined.epochs[epoch + 2]["outputs"][1]["text"] == later.epochs[epoch - 1]["outputs"][1]["text"]
    torch.testing.assert_close(torch.from_numpy(joined.attention(2, 0, "cross")[0]), earlier.maps["2/0/cross"].float(),
                               rtol=0, atol=0)
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


def staged(losses: list[float], seed: int, label: str) -> Timeline:
    timeline = stage(losses, seed)
    timeline.stages = [{"first_epoch": 1, "label": label}]
    return timeline


def test_joined_stages_start_where_their_epochs_were_renumbered_to():
    joined = concatenate(staged([3.0, 2.5, 2.2], 1, "from scratch"), staged([2.1, 2.0], 2, "a warm start from a"))
    assert joined.stages == [{"first_epoch": 1, "label": "from scratch"},
                             {"first_epoch": 4, "label": "a warm start from a"}]
    assert joined.stage_of(3) | {} == {"first_epoch": 1, "label": "from scratch", "number": 1, "epoch_in_stage": 3,
                                       "epochs_in_stage": 3}
    assert joined.stage_of(5)["number"] == 2 and joined.stage_of(5)["epoch_in_stage"] == 2
    assert joined.stage_of(5)["epochs_in_stage"] == 2
    assert stage([1.0], 1).stage_of(1) is None  # a timeline recorded before stages existed


def test_the_command_line_names_the_stages_of_an_old_timeline(tmp_path):
    stage([3.0, 2.5, 2.2, 2.1], seed=1).save(tmp_path / "model")
    timeline_cli(["--checkpoint", str(tmp_path / "model"), "--stage", "1", "stage 2", "a warm start from v1",
                  "--stage", "3", "stage 3", "on more data"])
    named = Timeline.load(tmp_path / "model")
    assert named.stages == [{"first_epoch": 1, "name": "stage 2", "label": "a warm start from v1"},
                            {"first_epoch": 3, "name": "stage 3", "label": "on more data"}]
    assert [e["train_loss"] for e in named.epochs] == [3.0, 2.5, 2.2, 2.1] and len(named.maps) == 8


@pytest.mark.parametrize("stages, message", [
    ([["x", "s", "l"]], "must be a whole number, got 'x'"),
    ([["9", "s", "l"]], "has no epoch 9 (its epochs are 1-4)"),
    ([["1", "s", "l"], ["1", "t", "m"]], "must start after the stage before it"),
    ([["2", "s", "l"]], "first --stage must start at the timeline's first epoch, 1"),
    ([["1", " ", "l"]], "needs a name and a label"),
])
def test_bad_stages_are_named_and_the_timeline_is_left_alone(tmp_path, capsys, stages, message):
    stage([3.0, 2.5, 2.2, 2.1], seed=1).save(tmp_path / "model")
    before = (tmp_path / "model" / "timeline.json").read_text()
    with pytest.raises(SystemExit):
        timeline_cli(["--checkpoint", str(tmp_path / "model"), *[w for s in stages for w in ("--stage", *s)]])
    assert message in capsys.readouterr().err
    assert (tmp_path / "model" / "timeline.json").read_text() == before


def test_the_training_view_says_which_stage_an_epoch_belongs_to():
    from explorer.figures import training_curves
    from explorer.views.training import stage_text

    joined = concatenate(staged([3.0, 2.5, 2.2], 1, "from scratch"), staged([2.1, 2.0], 2, "a warm start from a"))
    assert stage_text(joined, 2) == ", stage 1, its epoch 2 of 3: from scratch"
    assert stage_text(joined, 4) == ", stage 2, its epoch 1 of 2: a warm start from a"
    assert stage_text(staged([3.0, 2.0], 1, "from scratch"), 2) == ""  # one run from scratch: epochs are epochs
    assert stage_text(staged([3.0, 2.0], 1, "a warm start from v1"), 1) == ", epoch 1 of 2: a warm start from v1"
    figure = training_curves([1, 2, 3, 4, 5], [3.0, 2.5, 2.2, 2.1, 2.0], [1, 2, 3, 4, 5], 2, "t", [(4, "stage 2")])
    boundaries = [shape.x0 for shape in figure.layout.shapes]
    assert 3.5 in boundaries and 2 in boundaries  # between epochs 3 and 4, and the epoch looked at
    assert [a.text for a in figure.layout.annotations] == ["stage 2"]


def test_only_the_first_epochs_of_a_long_earlier_stage_are_prepended(tmp_path):
    stage([3.0, 2.5, 2.2, 2.1], seed=1).save(tmp_path / "earlier")
    later = stage([1.9, 1.8], seed=2)
    later.save(tmp_path / "model")
    timeline_cli(["--checkpoint", str(tmp_path / "model"), "--prepend", str(tmp_path / "earlier"),
                  "--prepend-epochs", "2"])
    joined = Timeline.load(tmp_path / "model")
    assert [e["train_loss"] for e in joined.epochs] == [3.0, 2.5, 1.9, 1.8]
    assert sorted(joined.maps) == sorted(f"{epoch}/{index}/cross" for epoch in (1, 2, 3, 4) for index in (0, 1))
    torch.testing.assert_close(joined.maps["3/1/cross"], later.maps["1/1/cross"], rtol=0, atol=0)  # a copy


@pytest.mark.parametrize("arguments, message", [
    (["--prepend-epochs", "9"], "must name one of"),
    (["--prepend-epochs", "0"], "must name one of"),
])
def test_bad_prepend_epochs_are_named(tmp_path, arguments, message):
    stage([3.0, 2.5], seed=1).save(tmp_path / "earlier")
    stage([1.9], seed=2).save(tmp_path / "model")
    with pytest.raises(SystemExit, match=message):
        timeline_cli(["--checkpoint", str(tmp_path / "model"), "--prepend", str(tmp_path / "earlier"), *arguments])
    assert len(Timeline.load(tmp_path / "model").epochs) == 1


def test_prepend_epochs_needs_prepend(tmp_path, capsys):
    stage([3.0, 2.5], seed=1).save(tmp_path / "model")
    with pytest.raises(SystemExit):
        timeline_cli(["--checkpoint", str(tmp_path / "model"), "--stage", "1", "s", "l", "--prepend-epochs", "1"])
    assert "--prepend-epochs goes with --prepend" in capsys.readouterr().err
