"""What the page adds around the views: the footer that names this server's decoding path, a "Download plot as SVG"
button on every plotly figure (plotly's own toolbar has PNG), and an info mark beside every tab name and label that
uses a glossary term (explorer/glossary.py): hover for its text, or tap."""
from __future__ import annotations

import json

from transformer.core.fused_step import unfit_architecture
from transformer.core.half_linear import KERNEL

from .glossary import page_terms
from .text import literal


def python_step_reasons(registry) -> dict[str, str]:
    """Per served model whose layers the kernel cannot run, whatever its status: why its decoding steps run in
    Python (a Marian model's post-norm layers, say; core/fused_step.py's unfit_architecture)."""
    if registry is None:
        return {}
    reasons = {key: unfit_architecture(served.translator.model.config) for key, served in registry.models.items()}
    return {key: why for key, why in reasons.items() if why is not None}


def decoding_path(pool=None, registry=None, notes=()) -> str:
    """The footer: which path this server's CPU decoding takes, and why when it is not the fast one, per model where
    one does not fit the kernel (`registry`); where translations run (`pool`: the service's run_pool.RunPool,
    None when app.py started none); and what the server's start-up could not do (`notes`, a Gradio patch that
    did not apply)."""
    status = KERNEL.status
    if status == "ready":
        path = ("CPU decoding reads float16 copies of the weights through the compiled kernel (float32 arithmetic), "
                "every decoder layer's step in one call.")
    else:
        path = (f"CPU decoding runs float32 `F.linear`: the float16-weight kernel is {literal(status)} "
                "(the same numbers, slower per step; see docs/speed.md).")
    for key, why in python_step_reasons(registry).items():
        path += f" {literal(registry.get(key).label)} decodes through the Python step: {literal(why)}."
    path += " " + ("Translations run in the server's process." if pool is None else literal(pool.describe()))
    return " ".join([path, *(literal(note) for note in notes)])


# Runs once in the browser: every plotly figure's toolbar gets "Download plot as SVG" beside plotly's own PNG
# button (the figures are drawn by the Plotly that Gradio bundles, which it exposes as window.Plotly).
PLOT_SVG_JS = """
() => {
  const add = () => {
    if (!window.Plotly) return;
    for (const plot of document.querySelectorAll('.js-plotly-plot')) {
      const png = plot.querySelector('.modebar-btn[data-title="Download plot as a PNG"]');
      if (!png || png.parentNode.querySelector('[data-title="Download plot as SVG"]')) continue;
      const button = png.cloneNode(true);
      button.setAttribute('data-title', 'Download plot as SVG');
      button.addEventListener('click', event => {
        event.stopPropagation();
        const owner = plot.closest('[id]');
        window.Plotly.downloadImage(plot, {format: 'svg', filename: owner ? owner.id : 'figure'});
      });
      png.parentNode.insertBefore(button, png.nextSibling);
    }
  };
  new MutationObserver(add).observe(document.body, {childList: true, subtree: true});
  add();
}
"""


def glossary_marks_js() -> str:
    """Runs once in the browser: tab names and component labels that use a glossary term get an info mark after them
    whose title is the term's text; a tap shows it in a box until the next tap. Labels drawn later (a tab opened) are
    marked as they appear, at most twice a second."""
    return """
() => {
  const TERMS = %s;
  const names = Object.keys(TERMS).sort((a, b) => b.length - a.length);
  const escape = t => t.replace(/[.*+?^${}()|[\\]\\\\]/g, "\\\\$&");
  const pattern = new RegExp("(^|[^\\\\w])(" + names.map(escape).join("|") + ")(?![\\\\w])", "i");
  let box = null;
  const show = (term, mark) => {
    if (!box) {
      box = document.createElement("div");
      box.className = "ae-gloss-box";
      document.body.appendChild(box);
      document.addEventListener("click", e => { if (!e.target.classList.contains("ae-info")) box.hidden = true; });
    }
    box.textContent = term + ": " + TERMS[term];
    const r = mark.getBoundingClientRect();
    box.style.left = Math.max(4, Math.min(window.innerWidth - 300, r.left)) + "px";
    box.style.top = (r.bottom + window.scrollY + 4) + "px";
    box.hidden = false;
  };
  const mark = () => {
    for (const el of document.querySelectorAll("button[role=tab], [data-testid=block-info], .ae-title")) {
      if (el.dataset.glossed || el.closest(".wk-walk")) continue;
      el.dataset.glossed = "1";
      const found = pattern.exec(el.textContent || "");
      if (!found) continue;
      const term = names.find(n => n.toLowerCase() === found[2].toLowerCase());
      const info = document.createElement("span");
      info.className = "ae-info";
      // the "i" is drawn by CSS (::after), so a tab's or label's text stays its own
      info.title = term + ": " + TERMS[term];
      info.dataset.term = term;
      info.setAttribute("aria-hidden", "true");  // a label's accessible name stays its own text
      info.addEventListener("click", event => { event.stopPropagation(); show(term, info); });
      el.appendChild(info);
    }
  };
  let queued = false;
  new MutationObserver(() => { if (!queued) { queued = true; setTimeout(() => { queued = false; mark(); }, 500); } })
    .observe(document.body, {childList: true, subtree: true});
  mark();
}
""" % json.dumps(page_terms(), ensure_ascii=False)
