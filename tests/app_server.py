"""Launching the app once per test module, on a free loopback port."""
import contextlib
import warnings


@contextlib.contextmanager
def running_app():
    warnings.filterwarnings("ignore", message=".*Pandas4Warning.*")
    import app
    from explorer.http_api import adding_routes_at_start
    from explorer.shell import LAUNCH

    # the page's own theme, style sheet and footer, as app.py launches it: the accessibility test reads their colours
    _, url, _ = app.demo.launch(**{**LAUNCH, "prevent_thread_lock": True, "quiet": True, "server_name": "127.0.0.1",
                                   "server_port": None, "app_kwargs": {"lifespan": adding_routes_at_start(app.ui)}})
    try:
        yield app, url
    finally:
        app.demo.close()


class ServerLog:
    """What the in-process server writes while a test runs: its stderr (where Gradio prints an event's traceback) and
    its log records at WARNING and above. Entered inside the test, after pytest has set up its own capture, and
    written through to it, so a failing test still shows the log."""

    def __init__(self):
        import io
        import logging

        self.text, self.records = io.StringIO(), []
        self.handler = logging.Handler(logging.WARNING)
        self.handler.emit = self.records.append

    def __enter__(self):
        import logging
        import sys

        log = self

        class Tee:
            def __init__(self, stream):
                self.stream = stream

            def write(self, text):
                log.text.write(text)
                return self.stream.write(text)

            def __getattr__(self, name):
                return getattr(self.stream, name)

        self.stderr, sys.stderr = sys.stderr, Tee(sys.stderr)
        logging.getLogger().addHandler(self.handler)
        return self

    def __exit__(self, *exc):
        import logging
        import sys

        sys.stderr = self.stderr
        logging.getLogger().removeHandler(self.handler)

    def lines(self) -> list[str]:
        """The stderr text, then each record as its logger, level and message (and traceback, if any)."""
        import logging

        formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
        return self.text.getvalue().splitlines() + [
            line for record in self.records for line in formatter.format(record).splitlines()]
