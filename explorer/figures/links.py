"""Word alignment links as an SVG drawn on the server: source words on top, target words below, a line per
link. Labels are escaped."""
from __future__ import annotations

import html

WORD_WIDTH, ROW_GAP, MARGIN = 92, 90, 12


def alignment_svg(src_words: list[str], tgt_words: list[str], links) -> str:
    width = MARGIN * 2 + max(len(src_words), len(tgt_words), 1) * WORD_WIDTH

    def x(index: int) -> float:
        return MARGIN + index * WORD_WIDTH + WORD_WIDTH / 2

    top, bottom = MARGIN + 14, MARGIN + 14 + ROW_GAP
    lines = "".join(f'<line x1="{x(s)}" y1="{top + 6}" x2="{x(t)}" y2="{bottom - 14}" stroke="#f97316" '
                    f'stroke-width="2" data-link="{s}-{t}"/>' for s, t in sorted(links))
    words = "".join(f'<text x="{x(i)}" y="{top}" text-anchor="middle" font-size="12" fill="currentColor">'
                    f'{html.escape(w)}</text>' for i, w in enumerate(src_words))
    words += "".join(f'<text x="{x(i)}" y="{bottom}" text-anchor="middle" font-size="12" fill="currentColor">'
                     f'{html.escape(w)}</text>' for i, w in enumerate(tgt_words))
    pairs = "; ".join(f"{src_words[s]} to {tgt_words[t]}" for s, t in sorted(links)) or "none"
    name = html.escape(f"Word alignment, {len(links)} links: {pairs}", quote=True)
    # a region a keyboard can scroll (tabindex), named for a screen reader, as a narrow screen scrolls it
    return (f'<div style="overflow:auto" tabindex="0" role="region" aria-label="word alignment">'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{bottom + MARGIN}" role="img" '
            f'aria-label="{name}">{lines}{words}</svg></div>')
