"""docs/architecture.md stays true to the code: its tree of the package names every module of transformer/ and
explorer/ where it lives and nothing that is gone, it names every public API endpoint the page serves, and its drawing
of the rooms on their floors is the one scripts/draw_packages.py draws from the imports now."""
import re

import pytest

from .conftest import ROOT, draw_packages

DOC = ROOT / "docs" / "architecture.md"
NAME = re.compile(r"^(\.\w+|[\w.-]+\.py|[\w.-]+/)$")  # a file, a sibling suffix (".cpp" after "x.py"), a folder


def tree_block(text: str) -> list[str]:
    """The lines of the fenced block that draws the folder tree (the one that starts with transformer/)."""
    blocks = re.findall(r"```\n(.*?)```", text, re.S)
    return next(block for block in blocks if block.startswith("transformer/")).splitlines()


def listed_files(lines: list[str]) -> set[str]:
    """Every file the tree names, as a path from the repository root. A line names files (and folders) before its
    description, which begins after two spaces; a folder holds the lines indented under it; a line whose first part
    is not names continues the description above it."""
    folders: list[tuple[int, str]] = []  # (indent, path) of the folders the current line is inside
    found = set()
    for line in lines:
        indent = len(line) - len(line.lstrip())
        names = [name.strip() for name in re.split(r"\s{2,}", line.strip())[0].split(",")]
        if not line.strip() or not all(NAME.match(name) for name in names):
            continue
        while folders and folders[-1][0] >= indent:
            folders.pop()
        here = folders[-1][1] if folders else ""
        stem = ""
        for name in names:
            if name.endswith("/"):
                if len(names) == 1:
                    folders.append((indent, here + name))
                continue
            if name.startswith("."):
                found.add(here + stem + name)
                continue
            stem = name.rsplit(".", 1)[0]
            found.add(here + name)
    return found


def modules() -> set[str]:
    paths = [*(ROOT / "transformer").rglob("*.py"), *(ROOT / "explorer").rglob("*.py")]
    return {str(path.relative_to(ROOT)) for path in paths if path.name != "__init__.py"}


def test_the_tree_names_every_module_where_it_lives_and_nothing_that_is_gone():
    listed = listed_files(tree_block(DOC.read_text(encoding="utf-8")))
    missing = sorted(modules() - listed)
    assert not missing, f"docs/architecture.md's tree does not name {missing}"
    gone = sorted(name for name in listed if name.startswith(("transformer/", "explorer/", "app.py"))
                  and not (ROOT / name).is_file())
    assert not gone, f"docs/architecture.md's tree names files that do not exist: {gone}"


def test_every_public_endpoint_is_named():
    from explorer.registry import discover
    from explorer.shell import build_demo

    demo, _ = build_demo(discover(ROOT / "checkpoints"))
    endpoints = {f.api_name for f in demo.fns.values() if f.api_visibility == "public"}
    text = DOC.read_text(encoding="utf-8")
    assert endpoints >= {"translate", "server_status"}  # the page serves its API
    missing = sorted(name for name in endpoints if not re.search(rf"/{name}\b", text))
    assert not missing, f"docs/architecture.md does not name the endpoints {missing}"


def test_the_tree_reader_follows_folders_suffixes_and_descriptions():
    lines = ["pkg/                   the package", "  a.py, b.py            two modules",
             "                         a description that goes on (c.py) over lines",
             "  sub/                  a folder", "    k.py, .cpp, .h       a kernel",
             "  d.py                  after it", "top.py                 at the root"]
    assert listed_files(lines) == {"pkg/a.py", "pkg/b.py", "pkg/sub/k.py", "pkg/sub/k.cpp", "pkg/sub/k.h",
                                   "pkg/d.py", "top.py"}


def test_the_drawing_is_the_one_the_imports_draw():
    drawer = draw_packages()
    shown = drawer.drawn_in(DOC.read_text(encoding="utf-8"))
    assert shown == drawer.drawing(ROOT), (
        f"docs/architecture.md's package drawing differs from the imports; redraw it with `{drawer.COMMAND}`")


def write_tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_drawer_puts_each_room_above_what_it_imports(tmp_path):
    """A small house: a folder room (two modules deep), loose modules on two floors, an entry point, imports written
    absolute, relative, inside a function and as `from package import module`."""
    write_tree(tmp_path, {
        "transformer/__init__.py": "from .core.model import Model\n",
        "transformer/paths.py": "import os\n",
        "transformer/numbers.py": "",
        "transformer/core/__init__.py": "",
        "transformer/core/model.py": "from ..paths import portable\n",
        "transformer/core/inner/deep.py": "from transformer import numbers\n",
        "explorer/__init__.py": "",
        "explorer/text.py": "",
        "explorer/views/__init__.py": "from ..text import literal\n",
        "explorer/shell.py": "def build():\n    from explorer.views import VIEWS\n    import transformer.core.model\n",
        "app.py": "from explorer.shell import build\n",
    })
    drawer = draw_packages()
    assert drawer.room_imports(tmp_path) == {
        "app.py": {"explorer/shell.py"}, "explorer/shell.py": {"explorer/views/", "transformer/core/"},
        "explorer/views/": {"explorer/text.py"}, "explorer/text.py": set(), "explorer/__init__.py": set(),
        "transformer/__init__.py": {"transformer/core/"}, "transformer/paths.py": set(),
        "transformer/numbers.py": set(), "transformer/core/": {"transformer/paths.py", "transformer/numbers.py"}}
    assert drawer.drawing(tmp_path).splitlines() == [
        "floor 4  app.py", "           ─▶ explorer/shell",
        "floor 3  explorer/shell", "           ─▶ explorer/views/, transformer/core/",
        "         transformer/__init__", "           ─▶ transformer/core/",
        "floor 2  explorer/views/", "           ─▶ explorer/text",
        "         transformer/core/", "           ─▶ transformer/{numbers, paths}",
        "floor 1  explorer/{__init__, text}", "         transformer/{numbers, paths}"]
    (tmp_path / "transformer" / "paths.py").write_text("from .core import model\n")
    with pytest.raises(ValueError, match="in a circle: transformer/core/ -> transformer/paths.py -> transformer/core/"):
        drawer.drawing(tmp_path)


def test_the_drawing_is_read_and_written_between_its_markers():
    drawer = draw_packages()
    text = f"# Doc\n\n{drawer.BEGIN}\n```\nold\n```\n{drawer.END}\n\nafter\n"
    rewritten = drawer.with_drawing(text, "floor 1  a.py\n")
    assert rewritten == f"# Doc\n\n{drawer.BEGIN}\n```\nfloor 1  a.py\n```\n{drawer.END}\n\nafter\n"
    assert drawer.drawn_in(rewritten) == "floor 1  a.py\n"
    with pytest.raises(ValueError, match="markers .* are missing"):
        drawer.drawn_in("# Doc without a drawing\n")
