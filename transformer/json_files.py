"""One JSON object read from a file, every problem an error of the caller's kind that names the file: the checkpoint's
files (checkpoint.py), a report beside the weights (command_line.py), a Hugging Face folder (convert_marian.py), an
atlas's atlas.json (atlas/store.py)."""
from __future__ import annotations

import json
from pathlib import Path


def read_json(path, error: type[Exception]) -> dict:
    """The JSON object in `path`; a missing, unreadable or malformed file, or one holding another JSON value, is an
    `error` that names the file."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{path}: file is missing")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as fault:
        raise error(f"{path}: not valid JSON ({fault})") from None
    if not isinstance(value, dict):
        raise error(f"{path}: expected a JSON object")
    return value
