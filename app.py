"""Attention Explorer: translate a sentence with a Transformer trained from scratch and look inside it.

    python app.py            # serves on GRADIO_SERVER_NAME:GRADIO_SERVER_PORT (default 127.0.0.1:7860)
    ATTENTION_EXPLORER_HUB_MODELS=Helsinki-NLP/opus-mt-en-de python app.py   # also a converted OPUS-MT model

The layout lives in explorer/shell.py, its events in explorer/wiring.py, the API in explorer/api.py, each tab in
explorer/views/; this file only loads the checkpoints and serves.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

# the explorer package skips Gradio's editor stubs before its first module imports gradio (explorer/__init__.py), so
# this file imports gradio only through it
from explorer.asset_cache import serve_assets_from_memory
from explorer.batch_costs import batch_log_from_environment
from explorer.gradio_sessions import NOT_PATCHED, lazy_session_configs
from explorer.http_api import adding_routes_at_start
from explorer.hub_models import cache_from_environment, converted_folders, hub_models_from_environment
from explorer.language import warm_up
from explorer.registry import discover
from explorer.result_cache import capacity_from_environment
from explorer.run_pool import RunPool, decode_on_one_thread, workers_from_environment
from explorer.shell import LAUNCH, build_demo
from explorer.training_queue import slots_from_environment
from transformer.core.kernel_build import switched_on

# Gradio rebuilds its monitoring summary (a pandas table of every recent event) after each event by default: a
# fixed cost per request that grows with the server's age; every 1,000 events is enough for its dashboard. Read when
# the page's queue is made, in build_demo below.
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
sessions_patched = lazy_session_configs()  # a visitor's first request does not copy every component's configuration

ROOT = Path(__file__).resolve().parent
try:  # a bad setting is one line that names it, before anything loads
    capacity_from_environment()
    workers = workers_from_environment()
    hub_models = hub_models_from_environment()
    switched_on()  # ATTENTION_EXPLORER_HALF_WEIGHTS
    slots_from_environment()  # ATTENTION_EXPLORER_TRAINING_SLOTS, read when the Learn tab first opens
    batch_log = batch_log_from_environment()  # ATTENTION_EXPLORER_BATCH_LOG
except ValueError as error:
    print(f"app.py: {error}", file=sys.stderr)
    raise SystemExit(2) from None

logging.basicConfig(level=logging.WARNING)
log = logging.getLogger("attention-explorer")
if batch_log:
    logging.getLogger("attention-explorer.batches").setLevel(logging.INFO)
# Hub models named by ATTENTION_EXPLORER_HUB_MODELS, converted once into their cache (explorer/hub_models.py)
hub_folders, _ = converted_folders(hub_models, cache_from_environment()) if hub_models else ([], {})
try:  # every model is loaded once, here, never per request; then ATTENTION_EXPLORER_DEFAULT_MODEL is checked
    registry = discover(ROOT / "checkpoints", hub_folders)
except ValueError as error:
    print(f"app.py: {error}", file=sys.stderr)
    raise SystemExit(2) from None
for name, why in registry.problems.items():
    log.warning("checkpoint %s skipped: %s", name, why)

demo, ui = build_demo(registry)
if not sessions_patched:  # said in the log and on the footer (wiring.py)
    log.warning("%s", NOT_PATCHED)
    ui.startup_notes.append(NOT_PATCHED)
# each request decodes on one torch thread: a decoding step multiplies 1 to 4 rows, which a second thread barely
# speeds up, while its idle spinning slows the other request (bench/load_test.py; docs/speed.md). Translations run
# in worker processes (explorer/run_pool.py), started once the server answers. Three handlers per core, so that a
# worker has the next request while the server sends the last one's result
HANDLERS = 3 * max(1, os.cpu_count() or 1)
decode_on_one_thread()
demo.queue(default_concurrency_limit=HANDLERS, max_size=64)



def launch(**options):
    """Serves the page as `python app.py` does (`options`: more of Gradio's launch arguments), the JSON API beside it
    (explorer/http_api.py) there before the server answers anything; returns what `demo.launch` returns."""
    lifespan = {"lifespan": adding_routes_at_start(ui)}
    return demo.launch(**{**LAUNCH, "app_kwargs": lifespan, "prevent_thread_lock": True, **options})


def after_launch() -> RunPool:
    """What the server adds once it answers: Gradio's frontend files from memory (explorer/asset_cache.py), the
    language identifier (explorer/language.py) and the worker processes that translate (explorer/run_pool.py), both
    loaded in the background."""
    serve_assets_from_memory(demo)
    threading.Thread(target=warm_up, args=(registry,), name="language-warm-up", daemon=True).start()
    ui.service.pool = RunPool(ROOT / "checkpoints", workers, hub_folders)
    ui.service.pool.start()
    return ui.service.pool


if __name__ == "__main__":
    launch()
    after_launch()  # once the server answers: loading the workers takes the cores for a moment
    demo.block_thread()
