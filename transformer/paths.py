"""Paths as a shipped file records them: never an absolute path of the machine that wrote it.

metrics.json, a timeline's stage labels and the reproduce commands travel with a checkpoint to every machine (and
the app shows them), so a folder such as /root/runs2/mix is written as `runs2/mix`; one inside the working
directory keeps its relative form, and a relative path as typed (../shared/data) stays as it is. The files a run
reads and writes while it runs (its resume state, a mix's recipe) keep the real paths: only what is recorded for
others is made portable.
"""
from __future__ import annotations

import ntpath
import os
import re
from pathlib import Path, PurePosixPath

_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
_ABSOLUTE = re.compile(r"^(?:/[\w.-]|~[\w.-]*/|\\\\\w)")  # /root/..., ~/runs, \\server\share (a lone "/" is not one)


def is_machine_path(text: str) -> bool:
    """An absolute path (POSIX, Windows or ~), or a relative one that climbs more than one folder above the
    working directory: either names the layout of one machine."""
    text = str(text)
    if _ABSOLUTE.match(text) or _WINDOWS_DRIVE.match(text):
        return True
    parts = PurePosixPath(text.replace("\\", "/")).parts
    return parts[:2] == ("..", "..")


def portable_path(path) -> str:
    """`path` as typed when it is not a machine path; else relative to the working directory when it lies inside it,
    or its last two parts: /root/runs2/mix becomes runs2/mix, C:\\runs\\mix becomes runs/mix, and
    ../shared/data/tatoeba stays as it is."""
    text = str(path)
    if not is_machine_path(text):
        return PurePosixPath(text.replace("\\", "/")).as_posix()
    if os.name != "nt" and (_WINDOWS_DRIVE.match(text) or text.startswith("\\\\")):  # a Windows path read elsewhere
        return "/".join([part for part in ntpath.normpath(text).split("\\")[1:] if part][-2:])
    absolute = Path(os.path.abspath(os.path.expanduser(text)))
    if absolute.is_relative_to(Path.cwd()):
        return absolute.relative_to(Path.cwd()).as_posix()
    return PurePosixPath(*absolute.parts[-2:]).as_posix()


def portable_words(words: list[str]) -> list[str]:
    """A command line's words with every machine path made portable (also the value of `--flag=PATH`)."""
    portable = []
    for word in words:
        flag, equals, value = word.partition("=")
        if equals and flag.startswith("-") and is_machine_path(value):
            portable.append(f"{flag}={portable_path(value)}")
        else:
            portable.append(portable_path(word) if is_machine_path(word) else word)
    return portable
