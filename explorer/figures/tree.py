"""The search tree as an SVG drawn on the server (no plotting library): one column per decoding step, the
winning path on the top row, every node clickable (`data-node`), labels escaped."""
from __future__ import annotations

import html
import math

from transformer.core.head_ref import shown

COLUMN_WIDTH, ROW_HEIGHT, MARGIN = 84, 24, 16  # COLUMN_WIDTH: the narrowest; a column widens to its longest piece
CHARACTER_WIDTH = 8  # px of one character at font-size 11 in the page's font (the Soft theme's), generously
MAX_NODES_PER_STEP = 12  # beyond this, a step's lowest-scoring pruned nodes are hidden (and counted)
STATUS_COLORS = {"kept": "#60a5fa", "finished": "#34d399", "pruned": "#9ca3af"}
WINNER_COLOR = "#f97316"


def visible_nodes(tree) -> tuple[list, int]:
    """The nodes drawn, step by step, and how many pruned ones were hidden to keep each step readable."""
    winner = set(tree.winner)
    by_depth: dict[int, list] = {}
    for node in tree.nodes:
        by_depth.setdefault(node.depth, []).append(node)
    shown, hidden = [], 0
    for depth in sorted(by_depth):
        ordered = sorted(by_depth[depth], key=lambda n: (n.id not in winner, n.status == "pruned", -n.score))
        shown.append(ordered[:MAX_NODES_PER_STEP])
        hidden += max(0, len(ordered) - MAX_NODES_PER_STEP)
    return shown, hidden


def tree_svg(tree, selected: int | None = None) -> str:
    columns, hidden = visible_nodes(tree)
    winner = set(tree.winner)
    # each column as wide as its longest piece needs: pieces are drawn whole, never cut
    widths = [max(COLUMN_WIDTH, CHARACTER_WIDTH * max(len(n.token) for n in nodes) + 24) for nodes in columns]
    lefts = [MARGIN + sum(widths[:depth]) for depth in range(len(columns))]
    position, column_width = {}, {}
    for depth, nodes in enumerate(columns):
        for row, node in enumerate(nodes):
            position[node.id] = (lefts[depth], MARGIN + 16 + row * ROW_HEIGHT)
            column_width[node.id] = widths[depth]
    width = MARGIN * 2 + (sum(widths) if columns else COLUMN_WIDTH)
    height = MARGIN * 2 + 16 + max((len(c) for c in columns), default=1) * ROW_HEIGHT
    edges, labels = [], []
    for nodes in columns:
        for node in nodes:
            x, y = position[node.id]
            if node.parent in position:
                px, py = position[node.parent]
                on_path = node.id in winner and node.parent in winner
                edges.append(
                    f'<line x1="{px + column_width[node.parent] - 12}" y1="{py}" x2="{x}" y2="{y}" '
                    f'stroke="{WINNER_COLOR if on_path else "#d1d5db"}" stroke-width="{2.5 if on_path else 1}"/>'
                )
            color = WINNER_COLOR if node.id in winner else STATUS_COLORS.get(node.status, "#9ca3af")
            tip = (f"{node.token} · step {shown(node.depth)} · p {math.exp(node.log_prob):.3f} · "
                   f"score {node.score:.2f} · normalised {node.normalized_score:.2f} · {node.status}"
                   f"{' · winner' if node.id in winner else ''}")
            ring = ' stroke="#111827" stroke-width="2"' if node.id == selected else ""
            pressed = ' aria-pressed="true"' if node.id == selected else ""
            labels.append(
                f'<g class="tree-node" data-node="{node.id}" style="cursor:pointer" tabindex="0" role="button" '
                f'aria-label="{html.escape(tip, quote=True)}"{pressed}>'
                f"<title>{html.escape(tip)}</title>"
                f'<rect x="{x - 2}" y="{y - 9}" width="{column_width[node.id] - 14}" height="18" rx="4" '
                f'fill="{color}" fill-opacity="0.25"{ring}/>'
                f'<text x="{x + 2}" y="{y + 4}" font-size="11" fill="currentColor">{html.escape(node.token)}</text></g>'
            )
    steps = "".join(f'<text x="{lefts[d]}" y="{MARGIN}" font-size="10" fill="currentColor" '
                    f'opacity="0.6">step {d + 1}</text>' for d in range(len(columns)))
    # the counts are of what is drawn: one column per step, the winning path's tokens (</s> included)
    note = (f"{len(tree.nodes)} nodes over {len(columns)} steps; the winning path, {len(tree.winner)} steps long, "
            f"is orange, kept nodes blue, "
            f"finished green, pruned grey" + (f"; {hidden} low-scoring pruned nodes hidden" if hidden else "")
            + ". Click a node to see its step.")
    by_id = {node.id: node for node in tree.nodes}
    name = (f"Search tree, {len(tree.nodes)} nodes over {len(columns)} steps; the winning path: "
            + " ".join(by_id[i].token for i in tree.winner if i in by_id) + ". Each node is a button.")
    # a region a keyboard can scroll (tabindex), named for a screen reader, as a narrow screen scrolls it
    return (f'<div class="tree-note">{html.escape(note)}</div><div class="tree-scroll" style="overflow:auto" '
            f'tabindex="0" role="region" aria-label="search tree">'
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="group" '
            f'aria-label="{html.escape(name, quote=True)}">{steps}{"".join(edges)}{"".join(labels)}</svg></div>')
