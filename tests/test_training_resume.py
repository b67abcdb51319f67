"""A run stopped and resumed ends where a run straight through ends; two processes under torchrun train
like one process on the same global batches."""
import json
import os
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from transformer import train as train_cli
from transformer.training import train_args

from .conftest import ROOT

TINY = ["--vocab-size", "290", "--d-model", "32", "--n-heads", "4", "--n-layers", "1", "--d-ff", "64",
        "--dropout", "0.1", "--attention-dropout", "0.1", "--max-tokens", "1000", "--warmup", "10", "--lr", "3e-3",
        "--average", "2", "--threads", "1", "--epochs", "5", "--test-split", ""]

pytestmark = pytest.mark.slow


def run_state(out):
    state = json.loads((out / "resume" / "state.json").read_text())["result"]
    return state, load_file(str(out / "resume" / "model.safetensors"))


def test_stopping_and_resuming_gives_the_weights_of_a_run_straight_through(corpus_dir, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    common = ["--data-dir", str(corpus_dir), *TINY]
    train_cli.main([*common, "--out", str(straight), "--max-updates", "50"])
    train_cli.main([*common, "--out", str(split), "--max-updates", "9"])  # stops inside epoch 1
    assert not (split / "model.safetensors").exists()
    train_cli.main(["--resume", str(split), "--max-updates", "25", "--data-dir", str(corpus_dir)])  # epoch 2 ...
    train_cli.main(["--resume", str(split), "--max-updates", "50", "--data-dir", str(corpus_dir)])  # ... and on
    (a_state, a_weights), (b_state, b_weights) = run_state(straight), run_state(split)
    assert a_state["updates"] == b_state["updates"] == 50 and a_state["epoch"] >= 2  # crossed an epoch boundary
    # exact: one process, one torch thread (--threads 1), the same batches in the same shapes, so torch's kernels
    # take the same path every time; any difference is lost state (an RNG, a moment), not rounding
    assert b_state["update_losses"] == a_state["update_losses"]
    assert [r["val_bleu"] for r in b_state["reports"]] == [r["val_bleu"] for r in a_state["reports"]]
    assert a_state["best"] == b_state["best"]
    for name, tensor in a_weights.items():  # exact, for the same reason as the losses
        assert torch.equal(tensor, b_weights[name]), name
    timeline = json.loads((split / "timeline.json").read_text())
    assert [e["epoch"] for e in timeline["epochs"]] == [r["epoch"] for r in b_state["reports"]]


def test_resume_needs_a_run_of_this_version(corpus_dir, tmp_path):
    with pytest.raises(Exception, match="resume/state.json: missing"):
        train_cli.main(["--resume", str(tmp_path), "--data-dir", str(corpus_dir)])


@pytest.mark.parametrize("flag, value, message", [("--max-updates", "-1", "must not be negative"),
                                                   ("--epochs", "0", "must be at least 1")])
def test_bad_budgets_are_named(corpus_dir, tmp_path, capsys, flag, value, message):
    with pytest.raises(SystemExit):
        train_cli.main(["--data-dir", str(corpus_dir), "--out", str(tmp_path / "x"), flag, value])
    assert message in capsys.readouterr().err


def test_two_processes_under_torchrun_follow_the_one_process_loss(corpus_dir, tmp_path):
    # no dropout: each process draws its own masks, so only without it can the updates be the same
    common = ["--data-dir", str(corpus_dir), *TINY, "--max-updates", "20", "--no-bf16", "--dropout", "0",
              "--attention-dropout", "0"]
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    one = subprocess.run([sys.executable, "-m", "transformer.train", *common, "--out", str(tmp_path / "one")],
                         cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stderr[-3000:]
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "-m", "transformer.train", *common, "--out", str(tmp_path / "two")],
                         cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    single, parallel = run_state(tmp_path / "one")[0], run_state(tmp_path / "two")[0]
    assert len(single["update_losses"]) == len(parallel["update_losses"]) == 20
    # the same global batches, the same updates: the losses agree up to float summation order (two processes each sum
    # half a batch and all-reduce; float32 rounding compounds through 20 Adam updates, hence 1e-4 rather than 1e-5)
    assert parallel["update_losses"] == pytest.approx(single["update_losses"], rel=1e-4)
    assert single["update_losses"][-1] < single["update_losses"][0]


def test_a_short_torchrun_that_ends_inside_the_first_epoch_exits_cleanly(corpus_dir, tmp_path):
    # docs/training.md's `torchrun ... --max-updates 20` on the full corpus stops inside epoch 1: every process must
    # exit 0 (torchrun reports any non-zero child as a failed run) and leave a state that --resume continues
    out = tmp_path / "short"
    run = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                          "-m", "transformer.train", "--data-dir", str(corpus_dir), *TINY, "--max-updates", "2",
                          "--out", str(out)],
                         cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "no checkpoint was written yet" in run.stdout
    state, _ = run_state(out)
    assert state["updates"] == 2 and state["epoch"] == 1 and state["batches_done"] == 2


def test_a_run_on_the_default_data_folder_saves_its_state(corpus_dir, tmp_path, monkeypatch):
    # the default --data-dir is a Path, not a string: the run state must still be written as JSON
    monkeypatch.setattr(train_args, "default_data_dir", lambda: corpus_dir)  # where the --data-dir flag is made
    out = tmp_path / "run"
    train_cli.main([*TINY, "--out", str(out), "--epochs", "1"])
    args = json.loads((out / "resume" / "state.json").read_text())["args"]
    assert args["data_dir"] == str(corpus_dir)
