"""A sentence's whole live view as one self-contained HTML file: every attention kind, layer and head, weights
and weighted norms, with the same browser code as the page (static/live_data.js, live_render.js) and its style
sheet inlined, the payload embedded. It opens from disk with no server and loads nothing from a network, so it
goes into a paper's supplementary material or a slide as it is."""
from __future__ import annotations

import html
import json

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 16px; color: #1f2937; background: #fff; }}
h1 {{ font-size: 15px; margin: 0 0 4px; }} p {{ font-size: 12px; margin: 0 0 10px; opacity: 0.8; }}
{css}
</style>
</head>
<body>
<h1>{heading}</h1>
<p>{note}</p>
<div id="live-attention"><div class="ae-live"></div></div>
<script>
// what Gradio hands the page's copy of this code: its element, its value, and a watcher (nothing changes here)
const element = document.getElementById("live-attention");
const props = {{value: {payload}}};
const watch = () => {{}};
{code}
</script>
</body>
</html>
"""


def live_view_html(translation, run: dict) -> str:
    """The file for one translation; `run` says what produced it (model, settings, app version)."""
    from .views.live import LIVE_JS, STATIC  # here, not at the top: the views package imports the exports
    from .views.live_payload import live_payload

    payload = json.dumps(live_payload(translation), ensure_ascii=False, separators=(",", ":"))
    # inside <script>, "</" could close the element: a token like "</s>" must not end the script
    payload = payload.replace("</", "<\\/")
    note = (f"{translation.source} → {translation.text} · model {run.get('model')}, {translation.strategy} "
            f"{json.dumps(translation.settings, ensure_ascii=False)}, Attention Explorer {run.get('app_version')}")
    return PAGE.format(title=html.escape(f"Attention: {translation.source}"), heading=html.escape(translation.source),
                       note=html.escape(note), css=(STATIC / "live_view.css").read_text(encoding="utf-8"),
                       payload=payload, code=LIVE_JS.replace("</script", "<\\/script"))


WALK_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 16px; color: #1f2937; background: #fff; }}
@media (prefers-color-scheme: dark) {{ body {{ color: #e5e7eb; background: #111827; }} }}
h1 {{ font-size: 15px; margin: 0 0 4px; }} p {{ font-size: 12px; margin: 0 0 10px; opacity: 0.8; }}
{css}
</style>
</head>
<body>
<h1>{heading}</h1>
<p>{note}</p>
<div id="walkthrough"><div class="wk-walk" tabindex="0"></div></div>
<script>
// what Gradio hands the page's copy of this code: its element, its value, and a watcher (nothing changes here)
const element = document.getElementById("walkthrough");
const props = {{value: {payload}}};
const watch = () => {{}};
{code}
</script>
</body>
</html>
"""


def walk_html(payload: dict, run: dict) -> str:
    """The walk-through of one translation (views/walkthrough_payload.py's payload) as one file with the page's
    browser code and style sheet inlined: every stage moves offline. `run` says what produced it."""
    from .views.walkthrough import WALK_CSS, WALK_JS  # here, not at the top: the views package imports the exports

    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    note = (f"{payload['source']} → {payload['translation']} · source piece {payload['token']} "
            f"“{payload['token_piece']}”, step {payload['step']}, head {payload['head']} · model {run.get('model')}, "
            f"{run.get('strategy')} {json.dumps(run.get('settings'), ensure_ascii=False)}, Attention Explorer "
            f"{run.get('app_version')}")
    return WALK_PAGE.format(title=html.escape(f"How it computed this: {payload['source']}"),
                            heading=html.escape(f"How it computed this: {payload['source']}"), note=html.escape(note),
                            css=WALK_CSS, payload=data, code=WALK_JS.replace("</script", "<\\/script"))
