"""Launching the app once per test module, on a free loopback port."""
import contextlib
import warnings


@contextlib.contextmanager
def running_app():
    warnings.filterwarnings("ignore", message=".*Pandas4Warning.*")
    import app
    from explorer.shell import CSS

    _, url, _ = app.demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", server_port=None,
                                run_history=False, css=CSS)
    try:
        yield app, url
    finally:
        app.demo.close()
