"""Export files written for a visitor: a fresh folder per export; folders older than an hour are removed,
so a long-running server does not fill its disk (Gradio serves its own copies of the files)."""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from transformer.decoding.export import attention_csv, steps_csv, to_json

EXPORT_ROOT = Path(tempfile.gettempdir()) / "attention-explorer-exports"
EXPORT_MAX_AGE_S = 3600


def export_files(result) -> list[str]:
    EXPORT_ROOT.mkdir(exist_ok=True)
    now = time.time()
    for old in EXPORT_ROOT.iterdir():
        if now - old.stat().st_mtime > EXPORT_MAX_AGE_S:
            shutil.rmtree(old, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(dir=EXPORT_ROOT))
    files = {"translation.json": to_json(result.translations), "steps.csv": steps_csv(result.translations),
             "attention.csv": attention_csv(result.translations)}
    for name, content in files.items():
        (folder / name).write_text(content, encoding="utf-8")
    return [str(folder / name) for name in files]
