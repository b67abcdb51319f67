"""docs/architecture.md stays true to the code: its tree of the package names every module of transformer/ and
explorer/ where it lives and nothing that is gone, and it names every public API endpoint the page serves."""
import re

from .conftest import ROOT

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
