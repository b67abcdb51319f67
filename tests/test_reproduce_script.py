"""scripts/reproduce.sh: its stages chain, parse with train's own parser, and its last stage is the command, with
the settings and update count, that the shipped checkpoint's metrics.json records."""
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from transformer.training.diversify import build_parser as build_diversify_parser
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
    assert len(stages) >= 2
    assert stages[0].init_from is None
    for before, after in zip(stages, stages[1:]):
        assert after.init_from == before.out
    assert len({stage.out for stage in stages}) == len(stages)
    assert all(stage.max_updates and stage.max_updates > 0 for stage in stages)
    assert all((stage.src, stage.tgt) == tuple(pair.split("-")) for stage in stages)


@pytest.mark.parametrize("pair", PAIRS)
def test_last_stage_matches_the_shipped_checkpoint(pair):
    metrics = json.loads((ROOT / "checkpoints" / pair / "metrics.json").read_text())
    training, model = metrics["training"], metrics["model"]
    last = build_parser().parse_args(stage_commands(pair, "runs")[-1])
    assert last.max_updates == training["updates"]
    assert last.init_from == training["init_from"]
    for name in ("lr", "warmup", "max_tokens", "label_smoothing", "clip_norm", "seed", "epochs"):
        assert getattr(last, name) == pytest.approx(training[name]), name
    assert last.dropout == pytest.approx(model["dropout"])
    assert last.attention_dropout == pytest.approx(model["attention_dropout"])
    recorded = shlex.split(training["command"])
    assert recorded[:3] == ["python", "-m", "transformer.train"]
    assert learned_settings(last) == learned_settings(build_parser().parse_args(recorded[3:]))
    # a stage on a grown training split ships with the record of how that split was grown
    grown = last.data_dir != build_parser().get_default("data_dir")
    assert ("diversified" in metrics["data"]) == grown
    if grown:
        assert metrics["data"]["train"]["lines"] == metrics["data"]["diversified"]["train_lines"]["total"]


def test_a_stage_on_a_diversified_split_has_it_built_first_from_the_stage_before(tmp_path):
    """The split that --data-dir names is written by transformer.diversify, from the model the stage warm-starts
    from, after that model's length penalty is tuned on val (the settings diversify decodes with)."""
    commands, diversified_stages = dry_run("en-de", str(tmp_path)), 0
    for index, words in enumerate(commands):
        if words[2] != "transformer.train":
            continue
        stage = build_parser().parse_args(words[3:])
        if stage.data_dir is None or stage.data_dir == build_parser().get_default("data_dir"):
            continue
        earlier = [build_diversify_parser().parse_args(w[3:]) for w in commands[:index] if w[2] == "transformer.diversify"]
        assert [(d.out, d.forward) for d in earlier] == [(stage.data_dir, stage.init_from)]
        tunes = [w for w in commands[:index] if w[2] == "transformer.tune_length_penalty"]
        assert tunes == [["python", "-m", "transformer.tune_length_penalty", "--checkpoint", stage.init_from]]
        assert Path(ROOT / earlier[0].backward, "config.json").is_file()
        diversified_stages += 1
    assert diversified_stages == 1


def test_a_stopped_stage_resumes(tmp_path):
    (tmp_path / "en-de-v1" / "resume").mkdir(parents=True)
    first = stage_commands("en-de", str(tmp_path))[0]
    assert first[:2] == ["--resume", str(tmp_path / "en-de-v1")]


@pytest.mark.parametrize("args, env, message", [
    (["fr-en"], {}, "en-de or de-en"),
    ([], {}, "en-de or de-en"),
    (["en-de"], {"MAX_MINUTES": "soon"}, "MAX_MINUTES"),
])
def test_bad_settings_are_refused_before_anything_runs(args, env, message, tmp_path):
    result = run_script(*args, str(tmp_path), **env) if args else run_script(**env)
    assert result.returncode == 2
    assert message in result.stderr
    assert not any(tmp_path.iterdir())
