"""The `transformer` package as it was at an earlier commit, importable beside today's as `transformer_base`, so a
benchmark can time the previous path and the current one interleaved in one process."""
from __future__ import annotations

import contextlib
import importlib
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def base_package(commit: str):
    """Yields the package at `commit` (a git worktree in a scratch folder; its imports are relative, so it runs
    under another name), and removes the worktree afterwards."""
    with tempfile.TemporaryDirectory() as scratch:
        worktree = Path(scratch) / "base"
        made = subprocess.run(["git", "worktree", "add", "--detach", "-f", str(worktree), commit], cwd=ROOT,
                              capture_output=True, text=True)
        if made.returncode:
            raise SystemExit(f"--base {commit}: git worktree add failed: {made.stderr.strip()}")
        try:
            (Path(scratch) / "packages").mkdir()
            (Path(scratch) / "packages" / "transformer_base").symlink_to(worktree / "transformer")
            sys.path.insert(0, str(Path(scratch) / "packages"))
            yield importlib.import_module("transformer_base")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=ROOT, capture_output=True)
