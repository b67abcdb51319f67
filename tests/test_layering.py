"""The folder tree's layering holds: what each package may import, read from the source with ast."""
import ast

import pytest

from .conftest import ROOT, draw_packages

# package -> packages of transformer/ it must never import
FORBIDDEN = {"core": {"decoding", "analysis", "training", "corpus"}, "decoding": {"analysis", "training", "corpus"},
             "corpus": {"analysis", "training"}, "analysis": {"training"}}


def imported_packages(path) -> set[str]:
    """The transformer subpackages a module imports (relative or absolute)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level >= 2 or module.startswith("transformer."):  # ..x or transformer.x: another subpackage
                name = module.removeprefix("transformer.").split(".")[0]
                found.add(name if name else (node.names[0].name if node.names else ""))
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("transformer.")}
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_package_never_imports_the_layers_above_it(package):
    modules = sorted((ROOT / "transformer" / package).rglob("*.py"))
    assert modules
    for module in modules:
        wrong = imported_packages(module) & FORBIDDEN[package]
        assert not wrong, f"{module.relative_to(ROOT)} imports {sorted(wrong)}"


def test_the_check_sees_a_forbidden_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from ..training.trainer import train\nfrom transformer.corpus.data import pad\n")
    assert imported_packages(module) == {"training", "corpus"}


# ---- no circles: the import graph of transformer/, explorer/ and app.py, read with ast


def module_name(path, root) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(name: str, path, known: set[str]) -> set[str]:
    """The project modules `name` (at `path`) imports anywhere in it, at the top or inside a function (an import
    deferred into a function still closes a circle). Importing `p.m` from outside package `p` also runs `p`'s
    `__init__`, so that is an import of `p` too; a module's own packages are initialised before it, so `from . import
    m` is an import of the submodule `m` alone."""
    found = set()
    for base, named in draw_packages().import_statements(name, path):
        for target in [*named, base]:
            parts = target.split(".")
            for end in range(1, len(parts) + 1):  # the module and every package above it
                candidate = ".".join(parts[:end])
                if candidate in known and not name.startswith(candidate + "."):  # its own packages: run first
                    found.add(candidate)
    return found - {name}


def import_graph(root) -> dict[str, set[str]]:
    paths = sorted([*(root / "transformer").rglob("*.py"), *(root / "explorer").rglob("*.py"), root / "app.py"])
    paths = [path for path in paths if path.is_file()]
    names = {path: module_name(path, root) for path in paths}
    known = set(names.values())
    return {names[path]: imports_of(names[path], path, known) for path in paths}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan's algorithm): each holds a circle."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_the_house_has_no_circles():
    found = circles(import_graph(ROOT))
    assert not found, "import circles: " + "; ".join(" <-> ".join(group) for group in found)


def test_the_circle_check_sees_one(tmp_path):
    """Two modules that import each other, one of them only inside a function, and a package whose __init__
    imports a module that imports back into the package from outside it."""
    package = tmp_path / "explorer"
    (package / "views").mkdir(parents=True)
    (tmp_path / "transformer").mkdir()
    (tmp_path / "app.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "exports.py").write_text("from .views.live import draw\n")
    (package / "views" / "__init__.py").write_text("from .live import draw\nfrom .export import save\n")
    (package / "views" / "live.py").write_text("def draw():\n    pass\n")
    (package / "views" / "export.py").write_text("def save():\n    from ..exports import draw\n")
    (package / "text.py").write_text("from . import exports\n")
    assert circles(import_graph(tmp_path)) == [["explorer.exports", "explorer.views", "explorer.views.export"]]


DEFERRED_ALLOWED: set[str] = set()
PROJECT = {"transformer", "explorer"}


def deferred_imports(path) -> list[str]:
    """The project's own modules a file imports inside a function: with no circle left, none needs to wait."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PROJECT):
                found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''}")
            elif isinstance(node, ast.Import) and any(a.name.split(".")[0] in PROJECT for a in node.names):
                found.append(f"line {node.lineno}: import {', '.join(a.name for a in node.names)}")
    return found


def test_no_module_of_the_project_is_imported_inside_a_function():
    paths = [*(ROOT / "transformer").rglob("*.py"), *(ROOT / "explorer").rglob("*.py"), ROOT / "app.py"]
    for path in paths:
        if str(path.relative_to(ROOT)) not in DEFERRED_ALLOWED:
            assert not deferred_imports(path), f"{path.relative_to(ROOT)}: {deferred_imports(path)}"


def test_the_deferred_import_check_sees_one(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("import json\n\ndef f():\n    import json\n    from .x import y\n    from explorer import z\n")
    assert deferred_imports(module) == ["line 5: from .x", "line 6: from explorer"]


def test_the_translate_first_guard_is_written_once():
    """One guard (views/base.translated) says "Translate a sentence first." for every action that needs a result."""
    import gradio as gr

    from explorer.views.base import translated

    with pytest.raises(gr.Error, match="Translate a sentence first, then export it."):
        translated(None, {}, then=", then export it")
    writers = {str(path.relative_to(ROOT)) for path in (ROOT / "explorer").rglob("*.py")
               if "Translate a sentence first" in path.read_text(encoding="utf-8")}
    assert writers == {"explorer/views/base.py"}


# ---- rooms a reader takes in at one sitting: files of at most 300 lines, functions of at most 60 (argparse
# definitions, build_parser, apart)


# every kind of source the package holds: its Python, the browser code and style sheets it serves, the C++ kernel
SOURCE_KINDS = (".py", ".js", ".css", ".cpp", ".h")


def oversized(path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    found = [f"{len(text.splitlines())} lines"] if len(text.splitlines()) > 300 else []
    if path.suffix != ".py":  # function lengths: Python's, read from its syntax tree
        return found
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name != "build_parser":
            length = node.end_lineno - node.lineno + 1
            if length > 60:
                found.append(f"{node.name}: {length} lines")
    return found


def package_sources() -> list:
    return [path for folder in ("transformer", "explorer") for path in sorted((ROOT / folder).rglob("*"))
            if path.suffix in SOURCE_KINDS and path.is_file()] + [ROOT / "app.py"]


def test_files_and_functions_are_short():
    sources = package_sources()
    assert {path.suffix for path in sources} == set(SOURCE_KINDS), "a kind of source the check expects is gone"
    for path in sources:
        assert not oversized(path), f"{path.relative_to(ROOT)}: {oversized(path)}"


def test_the_size_check_sees_a_long_function(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n" + "    x = 1\n" * 61 + "\n\ndef build_parser():\n" + "    y = 2\n" * 70)
    assert oversized(module) == ["f: 62 lines"]


@pytest.mark.parametrize("suffix", [".js", ".css", ".cpp", ".h"])
def test_the_size_check_counts_the_lines_of_every_kind(tmp_path, suffix):
    source = tmp_path / f"long{suffix}"
    source.write_text("x;\n" * 301)
    assert oversized(source) == ["301 lines"]
    source.write_text("x;\n" * 300)
    assert oversized(source) == []
