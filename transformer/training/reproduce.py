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

# settings that change where or how fast a run goes, not what it learns
NOT_REPRODUCED = ("resume", "max_minutes", "max_updates", "threads", "save_epochs", "data_dir")


def reproduce_command(parser: argparse.ArgumentParser, args: argparse.Namespace, updates: int,
                      stopped_by_budget: bool) -> str:
    words = ["python", "-m", "transformer.train"]
    for action in parser._actions:  # argparse's public API has no other way to list a parser's flags
        name = action.dest
        if name == "help" or name in NOT_REPRODUCED or not action.option_strings:
            continue
        value = getattr(args, name, action.default)
        if value == action.default:
            continue
        flag = action.option_strings[0]
        if isinstance(action, argparse._StoreTrueAction):
            words.append(flag)
        else:
            words += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if stopped_by_budget:
        words += ["--max-updates", str(updates)]
    return " ".join(shlex.quote(word) for word in words)


def learned_settings(args: argparse.Namespace) -> dict:
    """The settings that decide what a run learns: two runs with equal ones train the same model."""
    return {name: value for name, value in vars(args).items() if name not in NOT_REPRODUCED}
