"""Attention Explorer: translate a sentence with a Transformer trained from scratch and look inside it.

    python app.py            # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)

The layout lives in explorer/shell.py, its events in explorer/wiring.py, the API in explorer/api.py, each tab in
explorer/views/; this file only loads the checkpoints and serves.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import gradio as gr

from explorer.registry import discover
from explorer.shell import CSS, build_demo

ROOT = Path(__file__).resolve().parent

logging.basicConfig(level=logging.WARNING)
log = logging.getLogger("attention-explorer")
registry = discover(ROOT / "checkpoints")  # every model is loaded once, here, never per request
for name, why in registry.problems.items():
    log.warning("checkpoint %s skipped: %s", name, why)

demo, ui = build_demo(registry)
# plain `def` handlers run in worker threads; more of them than cores only adds contention
demo.queue(default_concurrency_limit=max(1, os.cpu_count() or 1), max_size=64)

if __name__ == "__main__":
    demo.launch(css=CSS, theme=gr.themes.Soft(), run_history=False, footer_links=["api", "gradio", "settings"])
