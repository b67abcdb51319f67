"""The web app's logic, between the `transformer` package and the Gradio layout in app.py:
which checkpoints are served (registry), what a request runs (session), what each view draws (render)."""
from .gradio_import import skip_stub_generation

# before any module of the package imports gradio: Gradio's editor stubs, rebuilt at every import, slow the app's
# start-up (gradio_import.py); where gradio is imported already this does nothing
skip_stub_generation()
