"""The default runs, trained at build time by scripts/playground_replays.py: one folder per task, each a checkpoint
(config.json, model.safetensors, symbols.json, metrics.json) and its replay.json."""
from pathlib import Path

SHIPPED = Path(__file__).resolve().parent


def shipped_folder(task: str) -> Path:
    return SHIPPED / task
