"""The playground (transformer/playground/): each task's generator against its rule written here (German number words
from a table typed here, dates through datetime); the tokenizer cutting every task's text back into its pieces; the
shipped trained models' cross-attention against each task's pattern, over held-out examples and recomputed here;
a replay's attention at a step against a forward pass of that step's weights; the same seed giving the same losses;
and every bad setting refused with one message naming it."""
import datetime
import os
import random

import numpy as np
import pytest
import torch

from transformer.checkpoint import load_checkpoint
from transformer.core.capture import capture_attention
from transformer.playground import TASKS, PlaygroundRun, Replay, Settings, SettingsError, save_run
from transformer.playground.replay import LEVELS, REPLAY_FILE
from transformer.playground.shipped import shipped_folder

UNITS = "eins zwei drei vier fünf sechs sieben acht neun".split()
GERMAN = {10: "zehn", 11: "elf", 12: "zwölf", 13: "dreizehn", 14: "vierzehn", 15: "fünfzehn", 16: "sechzehn",
          17: "siebzehn", 18: "achtzehn", 19: "neunzehn", 20: "zwanzig", 30: "dreißig", 40: "vierzig", 50: "fünfzig",
          60: "sechzig", 70: "siebzig", 80: "achtzig", 90: "neunzig"}
ENGLISH = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
           "eighteen nineteen").split()
TENS = {20: "twenty", 30: "thirty", 40: "forty", 50: "fifty", 60: "sixty", 70: "seventy", 80: "eighty", 90: "ninety"}


def german(n: int) -> str:
    if n < 10:
        return UNITS[n - 1]
    if n in GERMAN:
        return GERMAN[n]
    ones = "ein" if n % 10 == 1 else UNITS[n % 10 - 1]
    return f"{ones}und{GERMAN[n - n % 10]}"


def english(n: int) -> str:
    return ENGLISH[n - 1] if n < 20 else TENS[n - n % 10] + (f"-{ENGLISH[n % 10 - 1]}" if n % 10 else "")


def test_german_table_spot_checks():
    # a few by heart, so the table above is itself checked
    assert [german(n) for n in (1, 16, 21, 30, 47, 71, 99)] == [
        "eins", "sechzehn", "einundzwanzig", "dreißig", "siebenundvierzig", "einundsiebzig", "neunundneunzig"]


@pytest.mark.parametrize("name", sorted(TASKS))
def test_generator_follows_its_rule(name):
    task, rng = TASKS[name], random.Random(7)
    tokenizer = PlaygroundRun.tokenizer_of(task)
    for _ in range(300):
        source, target = task.sample(rng)
        if name in ("copy", "reverse", "sort"):
            assert 1 <= len(source) <= 8 and all(p in "0123456789" for p in source)
            want = {"copy": source, "reverse": source[::-1], "sort": sorted(source, key=int)}[name]
            assert target == want
        elif name == "numbers":
            number = next(n for n in range(1, 100) if english(n) == "".join(source))
            assert "".join(target) == german(number)
        else:
            date = datetime.datetime.strptime(task.source_text(source), "%B %d, %Y").date()
            assert "".join(target) == date.isoformat()
        # the text a person reads is cut back into the same pieces
        assert tokenizer.pieces(task.source_text(source)) == source
        assert tokenizer.pieces(tokenizer.joiner.join(target)) == target
        assert len(task.expected_keys(source, target)) == len(target)


def test_the_numbers_task_is_scored_on_numbers_it_never_trains_on():
    """The held-out numbers (its evaluation set) are never drawn for training, and every word they use is trained
    on in other numbers: the score measures the rule learned, not the list remembered."""
    task = TASKS["numbers"]
    held_out = {"".join(target) for _, target in task.every_example()}
    assert len(held_out) == 16 and held_out <= {german(n) for n in range(1, 100)}
    rng = random.Random(11)
    drawn = [task.sample(rng) for _ in range(3000)]
    trained = {"".join(target) for _, target in drawn}
    assert not trained & held_out and len(trained) == 99 - len(held_out)  # every other number is trained on
    trained_words = {piece for source, target in drawn for piece in source + target}
    assert {piece for source, target in task.every_example() for piece in source + target} <= trained_words
    run = PlaygroundRun(Settings.checked(task="numbers", layers=1, heads=1, width=8, steps=1))
    assert {"".join(target) for _, target in run.evaluation} == held_out


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as the playground trains: on a busy 2-core machine a second thread's spinning made a
    30-update run 7 times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def shipped():
    return {name: load_checkpoint(shipped_folder(name)) for name in TASKS}


def argmax_share(model, task, examples, keys_rule) -> float:
    """The share of target pieces whose largest cross-attention weight is on the key `keys_rule` names (pieces where
    it names none left out), over `examples`, teacher-forced, computed here from the model; for the best of the
    single heads and of each layer's heads averaged (the Attention tab's "mean")."""
    tokenizer = PlaygroundRun.tokenizer_of(task)
    hits, total = 0, 0
    for source, target in examples:
        src = torch.tensor([[tokenizer.piece_to_id(p) for p in source] + [tokenizer.eos_id]])
        tgt = torch.tensor([[tokenizer.bos_id] + [tokenizer.piece_to_id(p) for p in target]])
        with torch.no_grad(), capture_attention(model) as att:
            model(src, tgt)
        cross = att.cross[:, 0]  # (L, H, T, S); row i predicts target[i]
        maps = torch.cat([cross, cross.mean(1, keepdim=True)], dim=1)  # every head, then each layer's mean
        best = maps.argmax(-1)  # (L, H + 1, T)
        wanted = [(i, k) for i, k in enumerate(keys_rule(source, target)) if k is not None]
        hits = hits + torch.stack([(best[:, :, i] == k) for i, k in wanted]).sum(0)
        total += len(wanted)
    return (hits.max() / total).item()


RULES = {  # the key each target piece should read, written here, independently of tasks.py
    "copy": (lambda s, t: list(range(len(t))), 0.9),
    "reverse": (lambda s, t: [len(s) - 1 - i for i in range(len(t))], 0.9),
    # sort and dates: well above chance (one source piece in up to 9, or 11), not a clean map: a second head shares
    # the work (docs/playground.md gives each shipped model's shares)
    "sort": (lambda s, t: [sorted(range(len(s)), key=lambda j: (s[j], j))[i] for i in range(len(t))], 0.7),
    "numbers": (lambda s, t: [len(s) - 1, None, 0] if len(t) == 3 else [0], 0.9),
    # the year, read in place; its share varies with the seed: 65, 90 and 82 % for seeds 1 to 3 of the default run
    # (80, 94 and 78 % at a constant learning rate), against 1 in up to 11 by chance
    "dates": (lambda s, t: [len(s) - 4 + i for i in range(4)] + [None] * 6, 0.6),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_trained_model_shows_its_pattern(shipped, name):
    model, _, config = shipped[name]
    task, (rule, least) = TASKS[name], RULES[name]
    assert config["playground"]["task"] == name
    rng = random.Random("a test's own examples")
    examples = task.every_example() if task.every_example else [task.sample(rng) for _ in range(100)]
    assert argmax_share(model, task, examples, rule) >= least


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A 1-layer, 2-head, width-16 reverse run of 30 updates, the weights kept at step 20."""
    settings = Settings.checked(task="reverse", layers=1, heads=2, width=16, steps=30, redraw_every=10, seed=3,
                                held_out=20)
    run, kept = PlaygroundRun(settings), {}
    for snapshot in run.snapshots():
        if snapshot.step == 20:
            kept = {k: v.clone() for k, v in run.model.state_dict().items()}
    folder = save_run(run, tmp_path_factory.mktemp("reverse"))
    return run, kept, folder


def test_replay_equals_a_forward_pass_of_the_snapshot(tiny_run):
    run, kept, folder = tiny_run
    replay = Replay.load(folder / REPLAY_FILE)
    assert replay.steps == [0, 10, 20, 30]
    model, tokenizer, _ = load_checkpoint(folder)  # the same architecture, given the step-20 weights
    model.load_state_dict(kept)
    source, target = TASKS["reverse"].probe
    src = torch.tensor([[tokenizer.piece_to_id(p) for p in source] + [3]])
    tgt = torch.tensor([[2] + [tokenizer.piece_to_id(p) for p in target]])  # <s> target in; target </s> out
    with torch.no_grad(), capture_attention(model) as att:
        model(src, tgt)
    snapshot = replay.at(replay.steps.index(20))
    for kind in ("encoder_self", "decoder_self", "cross"):
        want = getattr(att, kind)[:, 0].numpy()
        # stored as bytes, each weight to the nearest 1/255 (replay.py)
        assert np.abs(snapshot["attention"][kind] - want).max() <= 0.5 / LEVELS + 1e-6
        assert np.allclose(snapshot["attention"][kind].sum(-1), 1, atol=want.shape[-1] * 0.5 / LEVELS)


def test_same_seed_same_losses(tiny_run):
    run = tiny_run[0]
    again = PlaygroundRun(run.settings)
    again.train()
    assert again.losses == run.losses and len(run.losses) == 30
    other = PlaygroundRun(Settings.checked(**{**run.settings.to_dict(), "seed": 4}))
    other.train()
    assert other.losses != run.losses


def test_checkpoint_opens_with_its_vocabulary(tiny_run):
    folder = tiny_run[2]
    from transformer import Translator

    translator = Translator.from_pretrained(folder)
    translation = translator.translate("3 1 4", strategy="greedy", record=("cross",))
    assert translation.src_tokens == ["3", "1", "4", "</s>"]
    assert translation.recorded["cross"].values.shape[:2] == (1, 2)


@pytest.mark.parametrize("values, named", [
    ({"width": 30, "heads": 4}, "width (30) must be divisible by heads (4)"),
    ({"layers": 0}, "layers must be in [1, 6], got 0"),
    ({"layers": 10_000}, "layers must be in [1, 6], got 10000"),
    ({"task": "juggle"}, "task must be one of ['copy', 'dates', 'numbers', 'reverse', 'sort'], got 'juggle'"),
    ({"time_cap": 0}, "time_cap must be in [0.1, 600.0], got 0"),
    ({"learning_rate": float("nan")}, "learning_rate must be a number in [1e-05, 0.1], got nan"),
    ({"width": float("nan")}, "width must be an integer in [8, 64], got nan"),
    ({"depth": 2}, "unknown settings ['depth']"),
])
def test_bad_settings_are_one_message(values, named):
    with pytest.raises(SettingsError) as raised:
        Settings.checked(**values)
    assert named in str(raised.value)


def test_the_command_line_writes_a_checkpoint_and_its_replay(tmp_path, capsys):
    from transformer import Translator
    from transformer.playground.__main__ import main

    out = tmp_path / "run"
    assert main(["train", "--task", "copy", "--layers", "1", "--heads", "1", "--width", "8", "--steps", "3",
                 "--redraw-every", "3", "--held-out", "5", "--out", str(out)]) == 0
    assert Replay.load(out / REPLAY_FILE).steps == [0, 3]
    assert Translator.from_pretrained(out).translate("1 2", strategy="greedy").src_tokens == ["1", "2", "</s>"]
    with pytest.raises(SystemExit) as stopped:
        main(["train", "--width", "30", "--heads", "4", "--out", str(tmp_path / "bad")])
    assert stopped.value.code == 2 and not (tmp_path / "bad").exists()
    message = capsys.readouterr().err.strip().splitlines()
    assert message[-1] == ("python -m transformer.playground: error: width (30) must be divisible by heads (4): each "
                           "head reads an equal slice of the width")
    assert main(["tasks"]) == 0 and "einundzwanzig" in capsys.readouterr().out


def test_the_command_line_keeps_another_runs_folder_and_refuses_an_unwritable_one_before_training(tmp_path, capsys,
                                                                                                  monkeypatch):
    from transformer.playground import __main__ as command
    from transformer.playground.trainer import RUN_FILES

    flags = ["train", "--task", "copy", "--layers", "1", "--heads", "1", "--width", "8", "--steps", "2",
             "--redraw-every", "2", "--held-out", "5"]
    trained = []
    real_run = command.PlaygroundRun
    monkeypatch.setattr(command, "PlaygroundRun", lambda settings: trained.append(settings) or real_run(settings))
    run = tmp_path / "run"
    assert command.main([*flags, "--out", str(run)]) == 0
    before = {name: (run / name).read_bytes() for name in RUN_FILES}
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    read_only = tmp_path / "locked"
    read_only.mkdir()
    read_only.chmod(0o500)
    cases = [([*flags, "--out", str(run), "--steps", "4"], f"--out {run} holds a run already ("),
             ([*flags, "--out", str(a_file)], f"--out {a_file} is a file, not a folder"),
             ([*flags, "--out", str(read_only / "run")], f"cannot be made: {read_only} is read-only")]
    if os.access(read_only, os.W_OK):  # root writes anywhere: the read-only case cannot be made here
        cases.pop()
    try:
        for argv, complaint in cases:
            with pytest.raises(SystemExit) as stopped:
                command.main(argv)
            message = capsys.readouterr().err.strip().splitlines()
            assert stopped.value.code == 2 and complaint in message[-1], message
    finally:
        read_only.chmod(0o700)
    assert len(trained) == 1  # each refusal came before any training
    assert {name: (run / name).read_bytes() for name in RUN_FILES} == before and a_file.read_text() == "mine"
    assert command.main([*flags, "--out", str(run), "--steps", "4", "--overwrite"]) == 0  # asked: replaced
    assert Replay.load(run / REPLAY_FILE).steps[-1] == 4


def test_a_loss_that_becomes_nan_stops_the_run_with_one_message(monkeypatch):
    from transformer.playground import RunError, trainer

    run = PlaygroundRun(Settings.checked(task="copy", layers=1, heads=1, width=8, steps=5, held_out=2))
    monkeypatch.setattr(trainer.F, "cross_entropy", lambda *args, **kwargs: torch.tensor(float("nan")))
    with pytest.raises(RunError, match=r"the loss became nan at step 1; lower learning_rate \(0.003\)"):
        run.train()
    assert run.losses == []  # no update was made with it
