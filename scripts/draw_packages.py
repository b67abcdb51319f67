"""Draws the package's rooms on their floors, from the imports of transformer/, explorer/ and app.py (read with ast).

A room is a folder inside a package (`transformer/core/`, `explorer/views/`, with the folders inside it), one of
the modules that lie loose in `transformer/` or `explorer/`, or an entry point (`app.py`). A room stands on the floor
above the highest room it imports, so every import points down; the loose modules of one folder that stand on the
same floor are drawn together (`explorer/{registry, text}`). Each room's line names it (after its floor, on the
floor's first line), and the arrow under it leads to the rooms it imports.

    python scripts/draw_packages.py            # print the drawing
    python scripts/draw_packages.py --write    # put it into docs/architecture.md, between its markers
"""
from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("transformer", "explorer")
ENTRY_POINTS = ("app.py",)
DOC = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- package drawing: begin -->", "<!-- package drawing: end -->"
COMMAND = "python scripts/draw_packages.py --write"
WIDTH = 116  # characters a drawn line may take before its imports go on under it


def module_paths(root: Path) -> dict[str, Path]:
    """Every module of the packages and the entry points, by dotted name."""
    paths = [path for package in PACKAGES for path in sorted((root / package).rglob("*.py"))]
    paths += [root / name for name in ENTRY_POINTS if (root / name).is_file()]
    names = {}
    for path in paths:
        parts = list(path.relative_to(root).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def room_of(path: Path, root: Path) -> str:
    """`transformer/core/` for any module under that folder (however deep), else the loose module's own path."""
    parts = path.relative_to(root).parts
    return "/".join(parts[:2]) + "/" if len(parts) > 2 else "/".join(parts)


def import_statements(name: str, path: Path) -> list[tuple[str, list[str]]]:
    """Every import of module `name` (at `path`), at the top or inside a function, relative ones resolved: (the module
    it imports from, each imported name as `module.name`); `import a.b` gives ("a.b", [])."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            found.append((base, [f"{base}.{alias.name}" for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
    return found


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The project's modules `name` imports, anywhere in the file: for `from p import m`, the module p.m where it is
    one, else p."""
    found = set()
    for base, named in import_statements(name, path):
        targets = [full if full in known else base for full in named] or [base]
        for target in targets:
            parts = target.split(".")
            prefixes = [".".join(parts[:end]) for end in range(len(parts), 0, -1)]
            found.update([prefix for prefix in prefixes if prefix in known][:1])  # the most specific module named
    return found - {name}


def room_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Room -> the other rooms it imports."""
    modules = module_paths(root)
    rooms = {name: room_of(path, root) for name, path in modules.items()}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        graph[rooms[name]] |= {rooms[target] for target in imported_modules(name, path, set(modules))}
        graph[rooms[name]].discard(rooms[name])
    return dict(graph)


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each room's floor: 1 for a room that imports none of the others, else one above the highest it imports."""
    floor: dict[str, int] = {}
    visiting: list[str] = []

    def visit(room: str) -> int:
        if room in visiting:
            circle = visiting[visiting.index(room):] + [room]
            raise ValueError("the rooms import each other in a circle: " + " -> ".join(circle))
        if room not in floor:
            visiting.append(room)
            floor[room] = 1 + max((visit(other) for other in sorted(graph[room])), default=0)
            visiting.pop()
        return floor[room]

    for room in sorted(graph):
        visit(room)
    return floor


def grouped(rooms) -> str:
    """Rooms written short: the folder rooms as they are, the loose modules of one folder as `folder/{a, b}`."""
    loose: dict[str, list[str]] = defaultdict(list)
    folders = []
    for room in sorted(rooms):
        if room.endswith("/"):
            folders.append(room)
        else:
            folder, _, module = room.rpartition("/")
            loose[folder].append(module.removesuffix(".py"))
    parts = [(folder, folder) for folder in folders]
    for folder, modules in loose.items():
        if not folder:
            parts += [(module, f"{module}.py") for module in modules]
        else:
            parts.append((folder, f"{folder}/{modules[0]}" if len(modules) == 1
                          else f"{folder}/{{{', '.join(modules)}}}"))
    return ", ".join(text for _, text in sorted(parts))


def drawing(root: Path = ROOT) -> str:
    """The drawing, top floor first; an arrow leads from each room to what it imports."""
    graph = room_imports(root)
    floor = floors(graph)
    lines = []
    for level in range(max(floor.values()), 0, -1):
        here = sorted(room for room in graph if floor[room] == level)
        by_folder: dict[tuple[str, ...], list[str]] = defaultdict(list)
        for room in here:  # the loose modules of one folder on one floor: one line, with what all of them import
            by_folder[(room,) if room.endswith("/") else (room.rpartition("/")[0], "")].append(room)
        for number, group in enumerate(sorted(by_folder.values(), key=lambda rooms: rooms[0])):
            imports = set().union(*(graph[room] for room in group)) - set(group)
            lines += drawn_line(f"floor {level}" if number == 0 else "", grouped(group), grouped(imports))
    return "\n".join(lines) + "\n"


def drawn_line(floor_label: str, room: str, imports: str) -> list[str]:
    """One room's lines: its floor (on a floor's first line) and the room, then an arrow to what it imports, wrapped
    at WIDTH under the arrow."""
    lines = [f"{floor_label:<9}{room}"]
    if not imports:
        return lines
    parts = split_outside_braces(imports)
    line = " " * 11 + "─▶"
    for index, part in enumerate(parts):
        piece = part + ("," if index < len(parts) - 1 else "")
        if index and len(line) + 1 + len(piece) > WIDTH:
            lines.append(line)
            line = " " * 13
        line += " " + piece
    return lines + [line]


def split_outside_braces(text: str) -> list[str]:
    """`a/{b, c}, d` -> ['a/{b, c}', 'd']."""
    parts, depth, current = [], 0, ""
    for character in text:
        depth += {"{": 1, "}": -1}.get(character, 0)
        if character == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += character
    return parts + [current.strip()]


def drawn_in(text: str) -> str:
    """The drawing between the markers of a document's text (inside its fenced block)."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"the markers {BEGIN} and {END} are missing")
    inside = text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")
    if not (inside.startswith("```") and inside.endswith("```")):
        raise ValueError("the drawing between the markers is not one fenced block")
    return inside.split("\n", 1)[1].rsplit("```", 1)[0]


def with_drawing(text: str, drawn: str) -> str:
    before, rest = text.split(BEGIN, 1)
    return f"{before}{BEGIN}\n```\n{drawn}```\n{END}{rest.split(END, 1)[1]}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the drawing in {DOC.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    drawn = drawing()
    if args.write:
        DOC.write_text(with_drawing(DOC.read_text(encoding="utf-8"), drawn), encoding="utf-8")
    else:
        sys.stdout.write(drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main())
