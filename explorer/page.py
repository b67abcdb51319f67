"""What the page adds around the views: the footer that names this server's decoding path, and a "Download plot
as SVG" button on every plotly figure (plotly's own toolbar has PNG)."""
from __future__ import annotations

from transformer.core.fused_step import unfit_architecture
from transformer.core.half_linear import KERNEL

from .text import literal


def python_step_reasons(registry) -> dict[str, str]:
    """Per served model whose layers the kernel cannot run, whatever its status: why its decoding steps run in
    Python (a Marian model's post-norm layers, say; core/fused_step.py's unfit_architecture)."""
    if registry is None:
        return {}
    reasons = {key: unfit_architecture(served.translator.model.config) for key, served in registry.models.items()}
    return {key: why for key, why in reasons.items() if why is not None}


def decoding_path(pool=None, registry=None) -> str:
    """The footer: which path this server's CPU decoding takes, and why when it is not the fast one, per model where
    one does not fit the kernel (`registry`); and where translations run (`pool`: the service's run_pool.RunPool,
    None when app.py started none)."""
    status = KERNEL.status
    if status == "ready":
        path = ("CPU decoding reads float16 copies of the weights through the compiled kernel (float32 arithmetic), "
                "every decoder layer's step in one call.")
    else:
        path = (f"CPU decoding runs float32 `F.linear`: the float16-weight kernel is {literal(status)} "
                "(the same numbers, slower per step; see docs/speed.md).")
    for key, why in python_step_reasons(registry).items():
        path += f" {literal(registry.get(key).label)} decodes through the Python step: {literal(why)}."
    return path + " " + ("Translations run in the server's process." if pool is None else literal(pool.describe()))


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
