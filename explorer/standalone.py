"""A sentence's whole live view as one self-contained HTML file: every attention kind, layer and head, weights
and weighted norms, with the same browser code as the page (static/live_data.js, live_render.js) and its style
sheet inlined, the payload embedded. It opens from disk with no server and loads nothing from a network, so it
goes into a paper's supplementary material or a slide as it is."""
from __future__ import annotations

import html
import json

from .assets import LIVE_CSS, LIVE_JS, WALK_CSS, WALK_JS
from .live_payload import live_payload

# every saved page's head: its title, the body's colours (dark ones with `dark`) and its own CSS
HEAD = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 16px; color: #1f2937; background: #fff; }}
{dark}
{css}
</style>
</head>
"""
VIEW_CSS = "h1 { font-size: 15px; margin: 0 0 4px; } p { font-size: 12px; margin: 0 0 10px; opacity: 0.8; }\n"
PAGE = HEAD + """<body>
<h1>{heading}</h1>
<p>{note}</p>
<div id="{element}">{root}</div>
<script>
// what Gradio hands the page's copy of this code: its element, its value, and a watcher (nothing changes here)
const element = document.getElementById("{element}");
const props = {{value: {payload}}};
const watch = () => {{}};
{code}
</script>
</body>
</html>
"""
DARK = "@media (prefers-color-scheme: dark) { body { color: #e5e7eb; background: #111827; } }"  # a format value


def page(element: str, root: str, title: str, heading: str, note: str, css: str, payload: dict, code: str,
         dark: bool = False) -> str:
    """One self-contained file: `code` (a view's browser code, as Gradio runs it) draws `payload` into `root`."""
    data = script_json(payload)
    return PAGE.format(title=html.escape(title), heading=html.escape(heading), note=html.escape(note),
                       css=VIEW_CSS + css,
                       element=element, root=root, dark=DARK if dark else "",
                       payload=data, code=code.replace("</script", "<\\/script"))


def script_json(payload: dict) -> str:
    """`payload` as a JavaScript literal that is safe inside <script>: every "<", ">" and "&" is written as a \\u
    escape, so no text of a visitor's ("</script>", "<!--<script>", which puts the HTML parser in a state where
    the real </script> no longer ends the element) can change where the script ends; U+2028/2029 are escaped too."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    for character in "<>&\u2028\u2029":
        data = data.replace(character, f"\\u{ord(character):04x}")
    return data


def live_view_html(translation, run: dict) -> str:
    """The file for one translation; `run` says what produced it (model, settings, app version)."""
    note = (f"{translation.source} → {translation.text} · model {run.get('model')}, {translation.strategy} "
            f"{json.dumps(translation.settings, ensure_ascii=False)}, Attention Explorer {run.get('app_version')}")
    return page("live-attention", '<div class="ae-live"></div>', f"Attention: {translation.source}",
                translation.source, note, LIVE_CSS,
                live_payload(translation), LIVE_JS)


def walk_html(payload: dict, run: dict) -> str:
    """The walk-through of one translation (views/walkthrough_payload.py's payload) as one file with the page's
    browser code and style sheet inlined: every stage moves offline. `run` says what produced it."""
    note = (f"{payload['source']} → {payload['translation']} · source piece {payload['token']} "
            f"“{payload['token_piece']}”, step {payload['step']}, every layer and head · model {run.get('model')}, "
            f"{run.get('strategy')} {json.dumps(run.get('settings'), ensure_ascii=False)}, Attention Explorer "
            f"{run.get('app_version')}")
    title = f"How it computed this: {payload['source']}"
    return page("walkthrough", '<div class="wk-walk" tabindex="0"></div>', title, title, note, WALK_CSS, payload,
                WALK_JS, dark=True)


CAUSE_CSS = ("h1 { font-size: 15px; margin: 0 0 4px; } p { font-size: 13px; margin: 0 0 10px; }\n"
             ".summary { white-space: pre-wrap; font-size: 13px; }")
FEATURES_CSS = (CAUSE_CSS + "\nmark { background: #fde68a; color: #1f2937; } .ae-latent { margin: 2px; }\n"
                ".ae-tokens { display: flex; flex-wrap: wrap; gap: 8px; list-style: none; padding: 0; }")
CAUSE_PAGE = HEAD + """<body>
<h1>{title}</h1>
<p class="summary">{summary}</p>
{figures}
<p>{agreement}</p>
<p>{note}</p>
</body>
</html>
"""


def cause_html(summary: str, figures: list, agreement: str, run: dict) -> str:
    """The Cause tab as one file: its summary and agreement as text, its figures with plotly's code inlined once
    (no network: the file opens offline). `run` says what produced it."""
    drawn = "".join(figure.to_html(full_html=False, include_plotlyjs=number == 0, include_mathjax=False)
                    for number, figure in enumerate(figures))
    note = (f"model {run.get('model')}, {run.get('strategy')} {json.dumps(run.get('settings'), ensure_ascii=False)}, "
            f"Attention Explorer {run.get('app_version')}")
    plain = summary.replace("**", "").replace("|---|---|", "").replace(" |", "").replace("| ", "")
    return CAUSE_PAGE.format(title="What causes this word (activation patching)", dark=DARK, css=CAUSE_CSS,
                             summary=html.escape(plain), figures=drawn, agreement=html.escape(agreement),
                             note=html.escape(note))


FEATURES_PAGE = HEAD + """<body>
<h1>{title}</h1>
{parts}
{figures}
<p>{note}</p>
</body>
</html>
"""


def features_html(point: str, parts: list[str], figures: list, run: dict) -> str:
    """The Features tab as one file: its HTML parts as the page drew them (their text escaped when drawn), its
    histogram with plotly's code inlined (no network). `run` says what produced it."""
    drawn = "".join(figure.to_html(full_html=False, include_plotlyjs=number == 0, include_mathjax=False)
                    for number, figure in enumerate(figures))
    note = f"model {run.get('model')}, dictionary at {point}, Attention Explorer {run.get('app_version')}"
    return FEATURES_PAGE.format(title=html.escape(f"Dictionary features at {point}"), dark=DARK, css=FEATURES_CSS,
                                parts="\n".join(parts), figures=drawn, note=html.escape(note))
