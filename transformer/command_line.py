"""What every command line of the package shares, so that each behaves the same on bad input:

- a bad argument or input file is answered in one line, `PROG: error: ...`, exit status 2, no traceback
  (`CommandParser`, and `answered` around the work for the errors found while loading);
- numeric flags, devices and thread counts are checked by argparse types built on the one number rule
  (numbers.py), before anything is loaded or computed;
- results are written only after a complete run, to a temporary file renamed into place (`write_atomically`),
  so a failed or interrupted run never replaces a shipped file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .json_files import read_json
from .numbers import NumberError, parsed_number
from .path_checks import folder_problem
from .unicode_text import TextError, check_text, checked_lines


class InputError(ValueError):
    """An input file (a reference, a report beside the weights) that cannot be used; the message names it."""


class CommandParser(argparse.ArgumentParser):
    """argparse with one-line errors: `PROG: error: MESSAGE` on stderr and exit status 2 (argparse's own status
    for a usage error), without the usage block, which `--help` shows."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def number_type(flag: str, kind: type = int, low=None, high=None):
    """An argparse type: the flag's text as a finite number of `kind` in [low, high] (None: no bound)."""

    def convert(text: str):
        try:
            return parsed_number(flag, text, kind, low, high)
        except NumberError as error:  # argparse puts "argument FLAG: " before the message
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{flag} ")) from None

    convert.__name__ = "int" if kind is int else "float"  # argparse names the type in some messages
    return convert


def checked_type(flag: str, check, kind: str):
    """An argparse type from a unicode_text check (`check(text)`): its TextError becomes argparse's message."""

    def convert(text: str) -> str:
        try:
            return check(text)
        except TextError as error:  # argparse puts "argument FLAG: " before the message
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{flag} ")) from None

    convert.__name__ = kind
    return convert


def text_type(flag: str):
    """An argparse type for text that reaches the tokenizer (a sentence): refused by the flag's name when it is not
    valid Unicode (a byte of argv that is not UTF-8 arrives as a lone surrogate, unicode_text.py)."""
    return checked_type(flag, lambda text: check_text(flag, text), "text")


def sentence_type(flag: str):
    """An argparse type for one sentence to translate, refused as the API refuses it (unicode_text.checked_lines):
    not valid Unicode, empty, longer than the API's limit, or of more than one line."""
    return checked_type(flag, lambda text: checked_lines(flag, text, 1)[0], "sentence")


def device_type(text: str) -> str:
    """--device: "cpu", or "cuda" where this machine has a CUDA device."""
    if text not in ("cpu", "cuda"):
        raise argparse.ArgumentTypeError(f"must be 'cpu' or 'cuda', got {text!r}")
    if text == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError("'cuda' was asked for, but this machine has no CUDA device torch can use")
    return text


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", type=device_type, default="cpu", help="cpu or cuda (default: cpu)")


def add_threads(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threads", type=number_type("--threads", int, 1, 1024), default=None,
                        help="torch CPU threads (default: torch's choice, all cores)")


@contextmanager
def answered(parser: argparse.ArgumentParser, *errors: type[Exception]):
    """Inside it, a bad input file, number or text (InputError, NumberError, TextError), or any of `errors` (the
    kinds the caller's work raises for what it loads: a CheckpointError, a CorpusError), ends the program through
    `parser.error`: one line naming the file or value, exit status 2."""
    try:
        yield
    except (InputError, NumberError, TextError, *errors) as error:
        parser.error(str(error))


def read_json_input(path) -> dict:
    """A JSON object read from `path` for a command line (a report beside the weights); a missing, unreadable or
    malformed file is an InputError naming it."""
    return read_json(path, InputError)


def check_writable(path) -> Path:
    """The output path, checked before any work: its folder exists and can be written to; a message says what the
    path or its folder is instead (a file where a folder is needed, read-only, missing: path_checks.py)."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InputError(f"{path}: is a folder; give a file path to write the result to")
    problem = folder_problem(folder)
    if problem:
        raise InputError(f"{path}: its folder {folder} {problem}")
    return path


def write_atomically(path, text: str) -> Path:
    """Writes `text` to a temporary file beside `path`, then renames it into place: readers see the old file or
    the new one, never a half-written one, and a run that fails before this call leaves `path` untouched."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~umask)  # mkstemp's is 0600
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def write_json_atomically(path, value, indent=2) -> Path:
    return write_atomically(path, json.dumps(value, indent=indent, ensure_ascii=False) + "\n")


def command_text(module: str, argv) -> str:
    """The command that produced a result, as recorded in its JSON."""
    import shlex

    return f"python -m {module} " + shlex.join(argv if argv is not None else sys.argv[1:])
