"""scripts/reproduce.sh: it builds the corpus mix the checkpoints record, its stages chain and parse with train's
own parser, and its last stage is the command, with the settings and update count, that the shipped checkpoint's
metrics.json records."""
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from transformer.corpus.data import build_parser as build_data_parser
from transformer.training.reproduce import learned_settings
from transformer.training.train import build_parser

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reproduce.sh"
PAIRS = ["en-de", "de-en"]


def run_script(*args: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**os.environ, **env})


def dry_run(pair: str, runs: str) -> list[list[str]]:
    result = run_script(pair, runs, DRY_RUN="1", PYTHON="python")
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line) for line in result.stdout.splitlines()]
    for words in commands:
        assert words[:2] == ["python", "-m"]
    return commands


def stage_commands(pair: str, runs: str) -> list[list[str]]:
    return [words[3:] for words in dry_run(pair, runs) if words[2] == "transformer.train"]


@pytest.mark.parametrize("pair", PAIRS)
def test_each_stage_starts_from_the_one_before(pair, tmp_path):
    stages = [build_parser().parse_args(words) for words in stage_commands(pair, str(tmp_path / "runs"))]
    assert stages[0].init_from is None  # the first from random weights, as the timeline shows
    for before, after in zip(stages, stages[1:]):
        assert after.init_from == before.out
    assert len({stage.out for stage in stages}) == len(stages)
    assert all(stage.max_updates and stage.max_updates > 0 for stage in stages)
    assert all((stage.src, stage.tgt) == tuple(pair.split("-")) for stage in stages)


@pytest.mark.parametrize("pair", PAIRS)
def test_every_stage_trains_on_the_mix_the_script_builds_first_as_the_checkpoint_records_it(pair, tmp_path):
    metrics = json.loads((ROOT / "checkpoints" / pair / "metrics.json").read_text())
    commands = dry_run(pair, str(tmp_path))
    assert commands[0][2:4] == ["transformer.data", "mix"]
    mix = build_data_parser().parse_args(commands[0][3:])
    recorded = metrics["data"]["mix"]["corpora"]
    assert [Path(folder).name for folder in mix.folders] == [corpus["name"] for corpus in recorded]
    assert mix.repeat == [corpus["repeat"] for corpus in recorded]
    for words in commands[1:]:
        assert build_parser().parse_args(words[3:]).data_dir == mix.out


@pytest.mark.parametrize("pair", PAIRS)
def test_last_stage_matches_the_shipped_checkpoint(pair):
    metrics = json.loads((ROOT / "checkpoints" / pair / "metrics.json").read_text())
    training, model = metrics["training"], metrics["model"]
    last = build_parser().parse_args(stage_commands(pair, "runs")[-1])
    assert last.max_updates == training["updates"]
    # the run folders were named as here, wherever they were (the GPU machine's, this machine's)
    assert (last.init_from and Path(last.init_from).name) == (
        training["init_from"] and Path(training["init_from"]).name
    )
    # the same decimal numbers, parsed from a command line and from JSON: approx only so ints and floats compare
    for name in ("lr", "warmup", "max_tokens", "label_smoothing", "clip_norm", "seed", "epochs"):
        assert getattr(last, name) == pytest.approx(training[name]), name
    assert last.dropout == pytest.approx(model["dropout"])
    assert last.attention_dropout == pytest.approx(model["attention_dropout"])
    if last.init_from is None:  # the shape and vocabulary are the stage's own (a warm start takes its model's)
        assert (last.n_layers, last.d_model, last.vocab_size) == (model["n_layers"], model["d_model"],
                                                                  metrics["tokenizer"]["vocab_size"])
    recorded = shlex.split(training["command"])
    assert recorded[:3] == ["python", "-m", "transformer.train"]
    original = build_parser().parse_args(recorded[3:])
    # folders are compared by name (the runs lived on other machines), the device is where it ran, and a
    # tokenizer file given to the original (built from the same training split) is the vocabulary asked for here
    where = ("out", "data_dir", "init_from", "device", "tokenizer", "vocab_size")
    assert {k: v for k, v in learned_settings(last).items() if k not in where} == {
        k: v for k, v in learned_settings(original).items() if k not in where}
    for name in ("out", "data_dir"):
        assert Path(getattr(last, name)).name == Path(getattr(original, name)).name, name


def test_a_stopped_stage_resumes(tmp_path):
    (tmp_path / "en-de-s1" / "resume").mkdir(parents=True)
    first = stage_commands("en-de", str(tmp_path))[0]
    assert first[:2] == ["--resume", str(tmp_path / "en-de-s1")]


@pytest.mark.parametrize("args, env, message", [
    (["fr-en"], {}, "en-de or de-en"),
    ([], {}, "en-de or de-en"),
    (["en-de"], {"MAX_MINUTES": "soon"}, "MAX_MINUTES"),
    (["en-de"], {"DEVICE": "tpu"}, "DEVICE must be cpu or cuda"),
    (["en-de"], {"CORPORA": "/nonexistent"}, "set CORPORA"),
])
def test_bad_settings_are_refused_before_anything_runs(args, env, message, tmp_path):
    result = run_script(*args, str(tmp_path), **env) if args else run_script(**env)
    assert result.returncode == 2
    assert message in result.stderr
    assert not any(tmp_path.iterdir())
