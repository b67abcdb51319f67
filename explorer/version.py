"""The app's version, from pyproject.toml, written into every export so a run can be reproduced."""
from __future__ import annotations

from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
APP_VERSION = (
    tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["version"] if PYPROJECT.is_file() else "unknown"
)
