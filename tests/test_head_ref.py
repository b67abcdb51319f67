"""One head address: 0-based inside, 1-based in text and reports, converted in one place."""
import ast
import re

import pytest

from explorer.heads_off import format_heads_off, parse_heads_off
from transformer.core.head_ref import HeadRef, head_label, layer_label

from .conftest import ROOT


@pytest.mark.parametrize("text, ref", [("cross 3 2", ("cross", 2, 1)), ("  encoder_self 1 1 ", ("encoder_self", 0, 0)),
                                       ("decoder_self 12 8", ("decoder_self", 11, 7))])
def test_text_is_numbered_from_one_and_the_address_from_zero(text, ref):
    parsed = HeadRef.parse(text)
    assert parsed == ref and parsed.entry == " ".join(text.split())
    assert parsed.numbered() == {"kind": ref[0], "layer": ref[1] + 1, "head": ref[2] + 1}
    assert HeadRef.from_numbered(parsed.numbered()) == parsed
    assert parsed.label == f"layer {ref[1] + 1} head {ref[2] + 1}"


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("cross 0 1", "numbered from 1"),
        ("cross 3", "must be 'kind layer head'"),
        ("sideways 1 1", "must be 'kind layer head'"),
        ("cross a b", "kind layer"),
        ("cross ١ 2", "kind layer"),  # Arabic-Indic digits: str.isdigit takes them, and int reads "١" as 1
        ("cross ² 1", "kind layer"),  # a superscript: str.isdigit takes it, int refuses it with its own message
        ("cross １ 2", "kind layer"),  # full-width
    ],
)
def test_a_malformed_entry_is_named(text, complaint):
    with pytest.raises(ValueError, match=complaint):
        HeadRef.parse(text)


def test_heads_off_text_round_trips_through_the_address():
    entries = parse_heads_off("cross 3 2; decoder_self 1 4, encoder_self 2 1")
    assert entries == [("cross", 2, 1), ("decoder_self", 0, 3), ("encoder_self", 1, 0)]
    assert format_heads_off(entries) == "cross 3 2; decoder_self 1 4; encoder_self 2 1"
    assert parse_heads_off("  ") is None
    assert (layer_label(0), head_label(3)) == ("layer 1", "head 4")


# ---- numbered for people in one place: no bare + 1 / - 1 on a layer, head, step or token index elsewhere

INDEX = re.compile(r"\b(layer|head|step|token|query|depth)(_index)?\b")  # an index by its name (not `n_layers`)
IN_TEXT = re.compile(r"\b(layer|head|step|token|query|depth)(_index)?\)?\s*[-+]\s*1\b(?![.\d])")  # browser code
CONVERTERS = {"transformer/core/head_ref.py", "explorer/static/head_ref.js"}
ALLOWED = {
    # positions counted in tensor arithmetic (a length through `step`), no number shown to people
    "transformer/analysis/alti_logit.py": "positions 0..step: a length", "transformer/decoding/strategies/beam.py":
        "the output's length after a step", "transformer/decoding/batch_beam.py": "the output's length after a step",
}


def bare_shifts(path) -> list[str]:
    """`x + 1` / `x - 1` with x named as a layer, head, step, token or query index (outside a slice's bounds, which
    count positions), in Python code and in the browser code a Python string holds; in a .js file, by its text."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".js":
        lines = enumerate(text.splitlines(), 1)
        return [f"line {n}: {m.group(0)}" for n, line in lines for m in IN_TEXT.finditer(line)]
    tree = ast.parse(text)
    in_slices = {id(node) for s in ast.walk(tree) if isinstance(s, ast.Slice) for node in ast.walk(s)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and id(node) not in in_slices:
            for operand, other in ((node.left, node.right), (node.right, node.left)):
                if isinstance(other, ast.Constant) and other.value == 1 and INDEX.search(ast.unparse(operand)):
                    found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += [(node.lineno, m.group(0)) for m in IN_TEXT.finditer(node.value)]
    return [f"line {line}: {code}" for line, code in sorted(found)]


def test_layers_heads_steps_and_tokens_are_numbered_only_by_head_ref():
    paths = [*(ROOT / "transformer").rglob("*.py"), *(ROOT / "explorer").rglob("*.py"), ROOT / "app.py",
             *(ROOT / "explorer" / "static").glob("*.js")]
    for path in paths:
        name = str(path.relative_to(ROOT))
        if name not in CONVERTERS and name not in ALLOWED:
            assert not bare_shifts(path), f"{name}: {bare_shifts(path)}: use head_ref's shown / from_shown"


def test_the_numbering_check_sees_a_bare_shift(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("a = rows[query - 1]\nb = x[: step + 1]\nc = n_layers - 1\nJS = 'view.head + 1'\n"
                      "d = {'step': node.depth + 1}\n")
    assert bare_shifts(module) == ["line 1: query - 1", "line 4: head + 1", "line 5: node.depth + 1"]
    script = tmp_path / "m.js"
    script.write_text("const name = `-layer${view.layer + 1}`;\nconst last = map.layers - 1;\n")
    assert bare_shifts(script) == ["line 1: layer + 1"]
