"""The web app's logic, between the `transformer` package and the Gradio layout in app.py:
which checkpoints are served (registry), what a request runs (session), what each view draws (render)."""
import os

from .gradio_import import skip_stub_generation

# one OpenMP thread in every thread of the server, set before torch loads OpenMP (where torch is loaded already, this
# does nothing): torch.set_num_threads(1) in app.py reaches only the thread that calls it, and Gradio's handler
# threads would start with one OpenMP thread per core, splitting loops otherwise than the worker processes do
os.environ.setdefault("OMP_NUM_THREADS", "1")

# before any module of the package imports gradio: Gradio's editor stubs, rebuilt at every import, slow the app's
# start-up (gradio_import.py); where gradio is imported already this does nothing
skip_stub_generation()
