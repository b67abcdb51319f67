"""The Features tab's pictures (explorer/views/features.py), as pure functions of the dictionary's readings
(transformer/features/reading.py): the sentence's tokens, each with its strongest latents as buttons; a latent's
page (label, how often it fires, its strongest contexts with the token marked, the pieces it promotes); its
activation histogram; and the translation before and after steering. The same HTML goes into the saved file."""
from __future__ import annotations

from difflib import SequenceMatcher

import plotly.graph_objects as go

from transformer.core.probes import SOURCE
from transformer.features.reading import SentenceLatents

from ..text import plain
from .theme import base_layout

# a latent's button: the page's script (views/features.py) puts its number in the Latent field and shows it
# (its name is its text: latent number, label, activation, so what is seen is what is heard, WCAG 2.5.3)
LATENT_BUTTON = ('<button type="button" class="ae-latent" data-latent="{latent}"><b>{latent}</b> {label} '
                 '<span class="ae-value">{value:.2f}</span></button>')


def latent_button(latent: int, value: float, label: str) -> str:
    return LATENT_BUTTON.format(latent=latent, label=plain(label or "no label"), value=value)


def tokens_html(read: SentenceLatents, labels: dict[int, str], per_token: int = 3, strongest: int = 12) -> str:
    """The sentence's strongest latents, then each token with its own `per_token` strongest. A decoder point's token
    is the piece predicted at that position (→ piece)."""
    side = "source pieces" if read.side == SOURCE else "translation's pieces (each position: the piece it predicted)"
    top = "".join(latent_button(j, v, labels.get(j, "")) for j, v, _ in read.strongest(strongest))
    cards = []
    for position, token in enumerate(read.tokens):
        shown = ("" if read.side == SOURCE else "→ ") + token.replace("▁", "·")
        buttons = "".join(latent_button(j, v, labels.get(j, "")) for j, v in read.top_of(position, per_token))
        cards.append(f'<li class="ae-token"><span class="ae-piece">{position + 1}: {plain(shown)}</span>'
                     f'{buttons or "<i>no latent</i>"}</li>')
    return (f'<div class="ae-features" data-point="{plain(read.point)}"><p class="ae-strongest">'
            f'<span>The sentence\'s strongest latents at {plain(read.point)}:</span> {top}</p>'
            f'<p>Each of the {plain(side)}, with its {per_token} strongest latents (latent number, label from its top '
            f'tokens, activation). Choose one to see what it is.</p><ol class="ae-tokens">{"".join(cards)}</ol></div>')


def context_html(context: dict) -> str:
    """One context: the pieces with the row's piece marked; a decoder point's source beside the target prefix."""
    marked, pieces = context["marked"], context["pieces"]
    if pieces[-1] == "</s>" and marked < len(pieces) - 1:
        pieces = pieces[:-1]  # the end of the sentence, shown only where it is the context's token
    pieces = [plain(p.replace("▁", " ")) for p in pieces]
    pieces[marked] = f"<mark>{pieces[marked]}</mark>"
    text = "".join(pieces).strip()
    if "source" in context:
        text = f'{plain(context["source"])} <span aria-hidden="true">⇒</span><span class="ae-sr"> translated as' \
               f'</span> {text}'
    return f'<li>{text} <span class="ae-value">{context["activation"]:.2f}</span></li>'


def latent_html(described: dict) -> str:
    """A latent's page (reading.describe's answer)."""
    share = described["active"] / max(described["tokens"], 1)
    promoted = described.get("promoted")
    promotes = "" if not promoted else (
        "<p>Its direction promotes these output pieces (logit change per unit of activation): "
        + ", ".join(f"{plain(p)} ({v:+.2f})" for p, v in promoted) + ".</p>")
    contexts = "".join(context_html(c) for c in described["contexts"]) or "<li>never active in the corpus</li>"
    return (f'<div class="ae-latent-page"><h3>Latent {described["latent"]}: {plain(described["label"] or "no label")}'
            f'</h3><p>Active on {described["active"]:,} of {described["tokens"]:,} tokens ({share:.2%}) of '
            f'{plain(described["corpus"])}. Its strongest contexts, the token marked:</p><ol>{contexts}</ol>'
            f'{promotes}</div>')


def histogram_figure(described: dict) -> go.Figure:
    edges, counts = described["histogram"]["edges"], described["histogram"]["counts"]
    names = [f"{low:.2f}–{high:.2f}" for low, high in zip(edges, edges[1:])]
    figure = go.Figure(go.Bar(x=names, y=counts, marker_color="#3b82f6",
                              hovertemplate="activation %{x}: %{y} tokens<extra></extra>"))
    figure.update_xaxes(title_text="activation", type="category", tickangle=-45)
    figure.update_yaxes(title_text="tokens")
    return base_layout(figure, f"Latent {described['latent']}: its non-zero activations over "
                               f"{described['tokens']:,} tokens", height=300)


def steered_html(latent: int, scale: float, before: str, after: str) -> str:
    """The translation (greedy) as it is and with the latent steered, the changed words marked."""
    old, new = before.split(), after.split()
    same = {j for block in SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks()
            for j in range(block.b, block.b + block.size)}  # the steered words that match the old, in order
    marked = " ".join(plain(w) if i in same else f"<mark>{plain(w)}</mark>" for i, w in enumerate(new))
    what = "turned off" if scale == 0 else f"at {scale:g} × its value"
    verdict = "The translation is unchanged." if before == after else "The translation changes (marked)."
    return (f'<table class="ae-steered"><caption>Latent {latent} {what}, at every position (greedy)</caption>'
            f'<tr><th scope="row">as it is</th><td>{plain(before)}</td></tr>'
            f'<tr><th scope="row">steered</th><td>{marked}</td></tr></table><p>{verdict}</p>')
