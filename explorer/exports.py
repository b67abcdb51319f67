"""Export files written for a visitor: a fresh folder per export; folders older than an hour are removed,
so a long-running server does not fill its disk (Gradio serves its own copies of the files)."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from transformer.decoding.export import attention_csv, bertviz_dict, steps_csv, to_json

from .standalone import cause_html, features_html, live_view_html, walk_html
from .version import APP_VERSION

EXPORT_ROOT = Path(tempfile.gettempdir()) / "attention-explorer-exports"
EXPORT_MAX_AGE_S = 3600


def run_description(result, registry) -> dict:
    """What produced `result`, enough to reproduce it."""
    served = registry.get(result.model_key)
    return {"model": result.model_key, "direction": served.translator.config.get("languages"),
            "weights_sha256": served.profile.weights_sha256, "strategy": result.strategy, "settings": result.settings,
            "device": result.device, "app_version": APP_VERSION}


def export_files(result, registry) -> list[str]:
    EXPORT_ROOT.mkdir(exist_ok=True)
    now = time.time()
    for old in EXPORT_ROOT.iterdir():
        if now - old.stat().st_mtime > EXPORT_MAX_AGE_S:
            shutil.rmtree(old, ignore_errors=True)
    folder = Path(tempfile.mkdtemp(dir=EXPORT_ROOT))
    run = run_description(result, registry)
    files = {"translation.json": to_json(result.translations, run), "steps.csv": steps_csv(result.translations),
             "attention.csv": attention_csv(result.translations),
             "bertviz.json": json.dumps({"run": run, **bertviz_dict(result.translations[0])}, ensure_ascii=False)}
    for number, translation in enumerate(result.translations, start=1):  # opens offline, for papers and slides
        files[f"live-attention-{number}.html"] = live_view_html(translation, run)
    for name, content in files.items():
        (folder / name).write_text(content, encoding="utf-8")
    return [str(folder / name) for name in files]


def walk_file(result, registry, translation, payload: dict) -> str:
    """The walk-through `payload` of `translation` saved as one HTML file that opens offline; returns its path."""
    EXPORT_ROOT.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(dir=EXPORT_ROOT))
    path = folder / f"walkthrough-token{payload['token']}-step{payload['step']}.html"
    path.write_text(walk_html(payload, run_description(result, registry)), encoding="utf-8")
    return str(path)


def cause_file(result, registry, summary: str, figures: list, agreement: str) -> str:
    """The Cause tab's pictures saved as one HTML file that opens offline; returns its path."""
    EXPORT_ROOT.mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=EXPORT_ROOT)) / "cause.html"
    path.write_text(cause_html(summary, figures, agreement, run_description(result, registry)), encoding="utf-8")
    return str(path)


def features_file(result, registry, point: str, named: dict) -> str:
    """The Features tab (its tokens, the chosen latent, its histogram, the steered translation) as one HTML file
    that opens offline; returns its path."""
    EXPORT_ROOT.mkdir(exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=EXPORT_ROOT)) / "features.html"
    parts = [named[name] for name in ("features_tokens", "features_about", "features_steered") if named.get(name)]
    figures = [named["features_histogram"]] if named.get("features_histogram") is not None else []
    path.write_text(features_html(point, parts, figures, run_description(result, registry)), encoding="utf-8")
    return str(path)
