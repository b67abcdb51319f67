"""The one `train` command that redoes a whole run, recorded in metrics.json and printed by the model card.

The command line a run was last started with is not that command: a resumed run was started with
`--resume OUT --max-minutes M`, and a `--max-minutes` budget stops after a number of updates that depends on the
machine's speed. So the command is rebuilt from the run's own arguments (every setting that differs from the
default), and a run that a budget stopped gets `--max-updates N` with the updates it actually made: resuming is
exact, so that one command ends where the sessions did.
"""
from __future__ import annotations

import argparse
import shlex
from pathlib import Path

# settings that change where or how fast a run goes, not what it learns. --data-dir is kept when it is given:
# a run on a grown training split (transformer.diversify) learns from other data than the default corpus.
NOT_REPRODUCED = ("resume", "max_minutes", "max_updates", "threads", "save_epochs")


def reproduce_command(parser: argparse.ArgumentParser, args: argparse.Namespace, updates: int,
                      stopped_by_budget: bool) -> str:
    words = ["python", "-m", "transformer.train"]
    for action in parser._actions:  # argparse's public API has no other way to list a parser's flags
        name = action.dest
        if name == "help" or name in NOT_REPRODUCED or not action.option_strings:
            continue
        value = getattr(args, name, action.default)
        if is_default(value, action.default):
            continue
        flag = action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):
            words.append(flag)
        else:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if stopped_by_budget:
        words += ["--max-updates", str(updates)]
    return " ".join(shlex.quote(word) for word in words)


def is_default(value, default) -> bool:
    """A folder counts as the default when it is the same folder: a resumed run reads its --data-dir back as text."""
    if isinstance(default, Path) and isinstance(value, (str, Path)):
        return Path(value).resolve() == default.resolve()
    return value == default


def learned_settings(args: argparse.Namespace) -> dict:
    """The settings that decide what a run learns: two runs with equal ones train the same model."""
    return {name: value for name, value in vars(args).items() if name not in NOT_REPRODUCED}
