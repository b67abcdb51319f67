"""A run's state on disk, so that `--resume` continues it exactly: weights, optimizer, schedule position,
epoch and batch within it (the data order is a function of the seed and the epoch), random state, the
epoch reports and the best epochs kept for averaging.

Layout, under the run's output folder:
    resume/state.json           TrainingResult's counters and reports, the run's arguments
    resume/model.safetensors    the weights being trained (float32)
    resume/best-NNN.safetensors one per best epoch kept for averaging
    resume/optimizer.pt         Adam's state (loaded with weights_only=True: tensors and numbers only)
    resume/rng.safetensors      torch's random state (dropout)
    resume/spm.model            the run's tokenizer
A save writes a fresh folder and then swaps it in, so a run killed while saving keeps the previous state.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from ..checkpoint import TOKENIZER_FILE, unique_state_dict
from .trainer import EpochReport, TrainingResult

RESUME_DIR = "resume"


class ResumeError(ValueError):
    pass


def save_run(out, model, optimizer, result: TrainingResult, args: dict, tokenizer_file) -> Path:
    out = Path(out)
    final, staging = out / RESUME_DIR, out / (RESUME_DIR + ".saving")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    state = {f.name: getattr(result, f.name) for f in fields(result) if f.name not in ("reports", "best_states")}
    state["reports"] = [asdict(r) for r in result.reports]
    state["best"] = [[bleu, epoch] for bleu, epoch, _ in result.best_states]
    # default=str: argument values such as the default --data-dir are Paths; they come back as the strings
    # argparse would have given
    (staging / "state.json").write_text(json.dumps({"result": state, "args": args}, indent=1, default=str) + "\n")
    save_file({k: v.detach().cpu().contiguous() for k, v in unique_state_dict(model).items()},
              str(staging / "model.safetensors"))
    for _, epoch, best in result.best_states:
        save_file(dedupe(best), str(staging / f"best-{epoch:03d}.safetensors"))
    torch.save(optimizer.state_dict(), staging / "optimizer.pt")
    save_file({"cpu": torch.get_rng_state()}, str(staging / "rng.safetensors"))
    shutil.copyfile(tokenizer_file, staging / TOKENIZER_FILE)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final


def dedupe(state: dict) -> dict:
    """A state dict without tensors that share storage (tied weights), as safetensors requires; loading
    with strict=False restores them through the module that owns them."""
    seen, kept = set(), {}
    for name, tensor in state.items():
        key = (tensor.data_ptr(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            kept[name] = tensor.contiguous()
    return kept


def saved_args(out) -> dict:
    path = Path(out) / RESUME_DIR / "state.json"
    if not path.is_file():
        raise ResumeError(f"{path}: missing; --resume needs the --out folder of a run started by this version")
    return json.loads(path.read_text())["args"]


def load_run(out, model, optimizer) -> TrainingResult:
    """Loads the saved weights into `model` and state into `optimizer`; returns the result to continue."""
    folder = Path(out) / RESUME_DIR
    saved = json.loads((folder / "state.json").read_text())["result"]
    model.load_state_dict(load_file(str(folder / "model.safetensors")), strict=False)
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    torch.set_rng_state(load_file(str(folder / "rng.safetensors"))["cpu"])
    best_states = []
    for bleu, epoch in saved.pop("best"):
        weights = load_file(str(folder / f"best-{epoch:03d}.safetensors"))
        best_states.append((bleu, epoch, full_state(model, weights)))
    reports = [EpochReport(**r) for r in saved.pop("reports")]
    return TrainingResult(reports=reports, best_states=best_states, **saved)


def full_state(model, weights: dict) -> dict:
    """`weights` (tied copies removed) as a complete state dict of `model`'s shape."""
    state = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    pointers = {}
    for name, tensor in model.state_dict().items():
        pointers.setdefault(tensor.data_ptr(), []).append(name)
    for names in pointers.values():
        source = next(n for n in names if n in weights)
        for name in names:
            state[name] = weights[source].clone()
    return state
