"""scripts/reproduce_en_de.sh: its stages chain, parse with train's own parser, and its last stage has the settings
and update count that the shipped En→De checkpoint's metrics.json records."""
import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest

from transformer.training.reproduce import NOT_REPRODUCED
from transformer.training.train import build_parser

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "reproduce_en_de.sh"


def stage_commands(runs: str, **env) -> list[list[str]]:
    result = subprocess.run(["bash", str(SCRIPT), runs], capture_output=True, text=True, cwd=ROOT, timeout=60,
                            env={**os.environ, "DRY_RUN": "1", "PYTHON": "python", **env})
    assert result.returncode == 0, result.stderr
    commands = [shlex.split(line) for line in result.stdout.splitlines()]
    for words in commands:
        assert words[:3] == ["python", "-m", "transformer.train"]
    return [words[3:] for words in commands]


def test_each_stage_starts_from_the_one_before(tmp_path):
    stages = [build_parser().parse_args(words) for words in stage_commands(str(tmp_path / "runs"))]
    assert len(stages) >= 2
    assert stages[0].init_from is None
    for before, after in zip(stages, stages[1:]):
        assert after.init_from == before.out
    assert len({stage.out for stage in stages}) == len(stages)
    assert all(stage.max_updates and stage.max_updates > 0 for stage in stages)


def test_last_stage_matches_the_shipped_checkpoint(tmp_path):
    metrics = json.loads((ROOT / "checkpoints" / "en-de" / "metrics.json").read_text())
    training, model = metrics["training"], metrics["model"]
    last = build_parser().parse_args(stage_commands(str(tmp_path))[-1])
    assert (last.src, last.tgt) == ("en", "de")
    assert last.max_updates == training["updates"]
    for name in ("lr", "warmup", "max_tokens", "label_smoothing", "clip_norm", "seed"):
        assert getattr(last, name) == pytest.approx(training[name]), name
    assert last.dropout == pytest.approx(model["dropout"])
    assert last.attention_dropout == pytest.approx(model["attention_dropout"])


def test_a_stopped_stage_resumes(tmp_path):
    (tmp_path / "en-de-v1" / "resume").mkdir(parents=True)
    first = stage_commands(str(tmp_path))[0]
    assert first[:2] == ["--resume", str(tmp_path / "en-de-v1")]


def test_a_bad_budget_is_refused(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                            timeout=60, env={**os.environ, "MAX_MINUTES": "soon"})
    assert result.returncode == 2
    assert "MAX_MINUTES" in result.stderr


def test_last_stage_is_the_command_the_checkpoint_records():
    recorded = json.loads((ROOT / "checkpoints" / "en-de" / "metrics.json").read_text())["training"]["command"]
    words = shlex.split(recorded)
    assert words[:3] == ["python", "-m", "transformer.train"]
    recorded_args, last = build_parser().parse_args(words[3:]), build_parser().parse_args(stage_commands("runs")[-1])
    learned = lambda args: {k: v for k, v in vars(args).items() if k not in NOT_REPRODUCED}
    assert learned(last) == learned(recorded_args)
    assert last.max_updates == recorded_args.max_updates
