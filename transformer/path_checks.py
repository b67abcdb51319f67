"""What a path IS, said in the messages of every command line and of the kernel build: a file where a folder is
needed, a read-only folder, a folder that cannot exist because a file stands in its path, or one that is missing.
"Does not exist" alone sends a person looking for a folder that is there, as a file.

The phrases complete a sentence about the path: f"{folder} {not_a_folder(folder)}" reads
"/tmp/notes/out cannot be made: /tmp/notes is a file, not a folder".
"""
from __future__ import annotations

import os
from pathlib import Path


def blocking_file(path) -> Path | None:
    """The file that stands where `path` or one of its folders should be (so nothing can be made there), if any."""
    for candidate in [Path(path), *Path(path).parents]:
        if candidate.exists():
            return None if candidate.is_dir() else candidate
    return None


def not_a_folder(path) -> str:
    """Why `path`, which is no folder, is none: "is a file, not a folder", "cannot be made: X is a file, not a
    folder" or "does not exist"."""
    path = Path(path)
    if path.exists():
        return "is a file, not a folder"
    blocker = blocking_file(path)
    if blocker is not None:
        return f"cannot be made: {blocker} is a file, not a folder"
    return "does not exist"


def folder_problem(folder) -> str | None:
    """Why nothing can be written into `folder` (see `not_a_folder`, or "is read-only"), or None when it can."""
    folder = Path(folder)
    if not folder.is_dir():
        return not_a_folder(folder)
    if not os.access(folder, os.W_OK):
        return "is read-only (it cannot be written to)"
    return None


def output_folder_problem(folder) -> str | None:
    """Why the output folder `folder` cannot be written, made where it is missing (see `folder_problem`, or "cannot
    be made: X is read-only"); None when it can. Commands check it before their work starts."""
    folder = Path(folder)
    if folder.exists():
        return folder_problem(folder)
    made_in = next(parent for parent in folder.parents if parent.exists())  # "." or "/" at the latest
    if not made_in.is_dir():
        return not_a_folder(folder)
    if not os.access(made_in, os.W_OK):
        return f"cannot be made: {made_in} is read-only"
    return None


def os_error_phrase(error: OSError) -> str:
    """An OSError from making or writing `error.filename`, as what that path is: "is read-only (permission denied)",
    "is a file, not a folder", "cannot be made: X is a file, not a folder", "is a folder, not a file"; else the
    system's own words."""
    if isinstance(error, PermissionError):
        return "is read-only (permission denied)"
    if error.filename is not None:
        path = Path(error.filename)
        if isinstance(error, IsADirectoryError):
            return "is a folder, not a file"
        if not path.is_dir() and (path.exists() or blocking_file(path) is not None):
            return not_a_folder(path)
    return error.strerror or type(error).__name__
