"""Imports Gradio without regenerating its type stubs: 0.8 of the 1.9 s `import gradio` takes on a 2-core machine.

Every component class Gradio defines (about forty, at import) passes through `ComponentMeta`, which parses the
class's source file and its `.pyi` stub with `ast` and rewrites the stub if it changed
(`gradio.component_meta.create_or_modify_pyi`): help for editors, of no use to a server. Gradio has no setting for
it, so `skip_stub_generation` swaps that function for a no-op as `gradio.component_meta` loads, before any component
class exists. Anything unexpected (a Gradio that moved the module, a loader without `exec_module`) leaves the import
exactly as Gradio does it. The stub of our own components (components.pyi) is committed.

    from explorer.gradio_import import skip_stub_generation
    skip_stub_generation()   # before the first `import gradio`
    import gradio as gr
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

MODULE = "gradio.component_meta"


class _SkipStubs(importlib.abc.MetaPathFinder):
    """Finds `gradio.component_meta` as Python would, and patches it right after it runs; then steps aside."""

    def find_spec(self, name, path, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)  # once: every later import is Python's own
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run_module = loader.exec_module

        def exec_module(module):
            run_module(module)
            if hasattr(module, "create_or_modify_pyi"):
                module.create_or_modify_pyi = lambda *args, **kwargs: None

        loader.exec_module = exec_module
        return spec


def skip_stub_generation() -> bool:
    """Installs the patch if Gradio is not imported yet; returns whether it did."""
    if MODULE in sys.modules or any(isinstance(finder, _SkipStubs) for finder in sys.meta_path):
        return False
    sys.meta_path.insert(0, _SkipStubs())
    return True
