"""Watch it learn: tiny Transformers trained on toy tasks (copy, reverse, sort, number words, dates) while their
attention forms, as replays a page can scrub and checkpoints every tool opens. `python -m transformer.playground`."""
from .replay import Replay, ReplayError
from .settings import Settings, SettingsError, default_settings
from .tasks import TASKS, Task, get_task
from .trainer import PlaygroundRun, RunError, Snapshot, save_run

__all__ = ["TASKS", "PlaygroundRun", "Replay", "ReplayError", "RunError", "Settings", "SettingsError", "Snapshot",
           "Task", "default_settings", "get_task", "save_run"]
