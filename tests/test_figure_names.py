"""The server-drawn SVG figures' text alternatives (docs/accessibility.md): the search tree named with its winning
path, each node a named button; the word alignment named with its links. Checked against the tree and the links
built here, read back from the SVG with an XML parser."""
import math
import xml.etree.ElementTree as ET

from explorer.figures.links import alignment_svg
from explorer.figures.tree import tree_svg
from transformer.decoding.trace import SearchTree, TreeNode

SVG = "{http://www.w3.org/2000/svg}"


def node(id, parent, depth, token, log_prob, status="kept"):
    return TreeNode(id=id, parent=parent, depth=depth, token_id=id, log_prob=log_prob, score=log_prob,
                    normalized_score=log_prob, status=status, token=token)


def parsed(html: str) -> ET.Element:
    return ET.fromstring(f"<root>{html}</root>")


def test_the_tree_is_named_by_its_winning_path_and_each_node_is_a_named_button():
    nodes = [node(0, None, 0, "▁Ein", -0.1), node(1, None, 0, "▁Der", -2.5, "pruned"), node(2, 0, 1, "▁Hund", -0.2),
             node(3, 0, 1, "▁Katze", -1.9, "pruned"), node(4, 2, 2, "</s>", -0.05, "finished")]
    tree = SearchTree(nodes=nodes, winner=[0, 2, 4])
    root = parsed(tree_svg(tree, selected=2))
    svg = root.find(f".//{SVG}svg")
    assert svg.get("role") == "group"
    assert "the winning path: ▁Ein ▁Hund </s>." in svg.get("aria-label")
    buttons = svg.findall(f".//{SVG}g[@role='button']")
    assert sorted(int(b.get("data-node")) for b in buttons) == [0, 1, 2, 3, 4]
    for button in buttons:
        drawn = nodes[int(button.get("data-node"))]
        assert button.get("tabindex") == "0"
        assert button.get("aria-label").startswith(f"{drawn.token} · step {drawn.depth + 1} · "
                                                   f"p {math.exp(drawn.log_prob):.3f}")
        assert (button.get("aria-pressed") == "true") == (drawn.id == 2)


def test_the_alignment_is_named_by_its_links_and_scrolls_by_keyboard():
    source, target = ["▁A", "▁dog", "▁runs"], ["▁Ein", "▁Hund", "▁läuft"]
    links = {(2, 2), (0, 0), (1, 1)}
    root = parsed(alignment_svg(source, target, links))
    box = root.find("div")
    assert box.get("tabindex") == "0" and box.get("role") == "region"
    name = box.find(f"{SVG}svg").get("aria-label")
    assert name == "Word alignment, 3 links: " + "; ".join(f"{source[s]} to {target[t]}" for s, t in sorted(links))
    assert len(box.findall(f".//{SVG}line")) == len(links)
