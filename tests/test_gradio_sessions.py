"""explorer/gradio_sessions.py: a session's block configurations made when read, the same as Gradio makes them."""
import json
import subprocess
import sys

import gradio as gr
import pytest
from gradio import state_holder

from explorer import gradio_sessions

from .conftest import ROOT


@pytest.fixture
def blocks():
    with gr.Blocks() as demo:
        text = gr.Textbox("hello", label="Text")
        with gr.Row():
            number = gr.Number(3, label="Number")
            gr.Markdown("**notes**")
        gr.State([1, 2])
    return demo, text, number


def configs(state, components=None) -> str:
    """The configurations a deep link reads, through `components` (Gradio's own property where given)."""
    read = state.components if components is None else components.fget(state)
    return json.dumps(list(read), default=str, sort_keys=True)


def test_a_session_configures_its_blocks_when_read_as_gradio_does(blocks, monkeypatch):
    demo, text, number = blocks
    gradio_init, gradio_components = state_holder.SessionState.__init__, state_holder.SessionState.components
    monkeypatch.setattr(state_holder.SessionState, "__init__", gradio_init)  # undone after the test
    monkeypatch.setattr(state_holder.SessionState, "components", gradio_components)
    gradios = state_holder.SessionState(demo)
    assert gradio_sessions.lazy_session_configs()
    assert gradio_sessions.lazy_session_configs()  # once
    ours = state_holder.SessionState(demo)
    assert ours.config_values == {}  # nothing made at creation
    for state in (gradios, ours):  # a value changed before anything reads the configurations
        state._update_value_in_config(number._id, 7)
    assert configs(ours) == configs(gradios, gradio_components)
    assert '"value": 7' in configs(ours) and '"value": "hello"' in configs(ours)
    for state in (gradios, ours):
        state._update_value_in_config(text._id, "changed")
    assert configs(ours) == configs(gradios, gradio_components)
    assert len(ours.config_values) == len(gradios.config_values)
    assert configs(gradios) == configs(gradios, gradio_components)  # a session made before the patch reads as before


def test_another_gradio_is_left_as_it_is(monkeypatch):
    class Other:
        def __init__(self, blocks):
            self.config_values = {"made": "at once"}

    monkeypatch.setattr(state_holder, "SessionState", Other)
    assert not gradio_sessions.lazy_session_configs()
    assert Other.__init__ is not gradio_sessions._init


def test_the_app_says_in_its_log_and_footer_when_the_patch_did_not_apply():
    """app.py started against another Gradio's SessionState (its digest changed here): the log's warning and the
    footer's note, and the sessions left as Gradio makes them."""
    code = ("import explorer.gradio_sessions as sessions\nsessions.KNOWN_INIT = 'another gradio'\nimport app\n"
            "from explorer.page import decoding_path\nfrom explorer.text import literal\n"
            "footer = decoding_path(None, app.registry, app.ui.startup_notes)\n"
            "print(app.ui.startup_notes == [sessions.NOT_PATCHED], literal(sessions.NOT_PATCHED) in footer,\n"
            "      app.sessions_patched, sessions.state_holder.SessionState.__init__ is sessions._init)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True", "False", "False"]
    assert "Gradio's session patch did not apply" in done.stderr
