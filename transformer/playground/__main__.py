"""`python -m transformer.playground`: train a tiny Transformer on a toy task, or list the tasks.

    python -m transformer.playground tasks
    python -m transformer.playground train --task reverse --layers 2 --heads 2 --width 32 --seed 1 --out runs/reverse

`train` writes a checkpoint folder every tool opens (the app, the walk-through, `Translator.from_pretrained`) and the
run's replay.json beside it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from ..command_line import CommandParser, InputError, answered
from ..path_checks import output_folder_problem
from .settings import LIMITS, LR_FLOOR, SCHEDULES, Settings, SettingsError
from .tasks import TASKS
from .trainer import RUN_FILES, PlaygroundRun, RunError, save_run

MEANINGS = {  # what a numeric flag sets, where its name does not say it
    "learning_rate": "Adam's peak learning rate, reached at the end of the warm-up: ",
    "warmup_ratio": "the share of --steps (rounded) over which the learning rate rises linearly from 0 to its peak: ",
}


def parser() -> CommandParser:
    main = CommandParser(prog="python -m transformer.playground", description=__doc__)
    commands = main.add_subparsers(dest="command", required=True)
    commands.add_parser("tasks", help="list the tasks and the attention each should learn")
    train = commands.add_parser("train", help="train one run and write its checkpoint and replay")
    defaults = Settings()
    train.add_argument("--task", default=defaults.task, help=f"one of {sorted(TASKS)} (default: %(default)s)")
    for name in LIMITS:
        kind, low, high = LIMITS[name]
        train.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                           help=f"{MEANINGS.get(name, '')}{kind.__name__} in [{low}, {high}] (default: the task's "
                                f"default model, else {getattr(defaults, name)})")
    train.add_argument("--pos-encoding", default=defaults.pos_encoding, help="sinusoidal or learned")
    train.add_argument("--norm", default=defaults.norm, help="pre or post")
    train.add_argument("--schedule", default=defaults.schedule,
                       help=f"the learning rate after the warm-up, one of {list(SCHEDULES)}: cosine falls along a half "
                            f"cosine to {LR_FLOOR:g} x its peak at the last step, constant stays at the peak "
                            "(default: %(default)s)")
    train.add_argument("--out", required=True, help="the folder to write the checkpoint and replay.json into")
    train.add_argument("--overwrite", action="store_true",
                       help="replace the run a folder given as --out holds (default: refuse it)")
    return main


def settings_from(args) -> Settings:
    """The flags as checked Settings: a flag left out takes the task's default model and steps, else the default."""
    values = {"task": args.task, "pos_encoding": args.pos_encoding, "norm": args.norm, "schedule": args.schedule}
    task = TASKS.get(args.task)
    if task is not None:
        values |= {"steps": task.steps, **task.model}
    for name, (kind, _, _) in LIMITS.items():
        text = getattr(args, name)
        if text is not None:
            values[name] = parse(text, kind)
    return Settings.checked(**values)


def parse(text: str, kind: type):
    """The flag's text as a number where it reads as one; anything else goes to `Settings.checked` as it was, which
    names the setting and its range."""
    try:
        number = float(text)
    except ValueError:
        return text
    return int(number) if kind is int and number.is_integer() and "." not in text else number


def writable_folder(path, overwrite: bool = False) -> Path:
    """--out, checked before training: a folder that can be written, or a place one can be made; a folder that holds
    a run already (a checkpoint or a replay) only with --overwrite."""
    problem = output_folder_problem(path)
    if problem:
        raise InputError(f"--out {path} {problem}")
    held = sorted(name for name in RUN_FILES if (Path(path) / name).exists())
    if held and not overwrite:
        raise InputError(f"--out {path} holds a run already ({', '.join(held)}): choose another folder, or pass "
                         "--overwrite to replace it")
    return Path(path)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.command == "tasks":
        for task in TASKS.values():
            print(f"{task.name:8} {task.title}: {task.pattern}.\n{'':9}Why: {task.why}.")
        return 0
    with answered(parser(), SettingsError, RunError):
        settings = settings_from(args)
        out = writable_folder(args.out, args.overwrite)
        torch.set_num_threads(1)  # reproducible on one CPU, and the same numbers the app's worker gets
        run = PlaygroundRun(settings)
        for snapshot in run.snapshots():
            print(f"step {snapshot.step:5}  loss {snapshot.loss:.4f}  exact match {snapshot.accuracy:.1%}  "
                  f"{snapshot.seconds:6.1f} s  → {run.tokenizer.joiner.join(snapshot.prediction)}", file=sys.stderr)
        save_run(run, out)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
