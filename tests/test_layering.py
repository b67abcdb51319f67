"""The folder tree's layering holds: what each package may import, read from the source with ast."""
import ast

import pytest

from .conftest import ROOT

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
