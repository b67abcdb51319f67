"""explorer/gradio_import.py: Gradio imported without rebuilding its editor stubs, and otherwise unchanged."""
import subprocess
import sys

from .conftest import ROOT

PROBE = """
import sys, time
{patch}
started = time.perf_counter()
import gradio as gr
import gradio.component_meta as meta
with gr.Blocks() as demo:
    box = gr.Textbox(value="hello")
print(meta.create_or_modify_pyi.__module__, box.value, type(box).__name__, sep="|")
"""


def run(patch: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(patch=patch)], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split("|")


def test_the_stub_rebuild_is_skipped_and_components_still_work():
    # the explorer package installs it before any of its modules imports gradio (explorer/__init__.py)
    patched = run("import explorer\nfrom explorer.gradio_import import skip_stub_generation\n"
                  "assert not skip_stub_generation()  # once")
    plain = run("")
    assert plain[0] == "gradio.component_meta"  # Gradio's own function, as it ships
    assert patched[0] == "explorer.gradio_import"  # the no-op installed as the module loaded
    assert patched[1:] == plain[1:] == ["hello", "Textbox"]


def test_it_does_nothing_once_gradio_is_imported():
    import gradio  # noqa: F401  (the test process has it already; make sure)

    from explorer.gradio_import import _SkipStubs, skip_stub_generation

    assert skip_stub_generation() is False
    assert not any(isinstance(finder, _SkipStubs) for finder in sys.meta_path)
