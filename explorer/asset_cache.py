"""Gradio's frontend files answered from memory: a page load asks the server for about 90 of them.

Why: each went through Gradio's whole ASGI stack (eight middlewares, routing, a file read and Brotli compression),
about 1.5 ms of the server's Python each, 140 ms per page load on this 2-core machine, while the browser waits and
a class of 30 loads the page at once. Their names carry a hash of their content (/assets/Index-DphvyggB.js; the
theme's CSS a ?v=hash), so the first response to a path is the response for good; fonts under /static/ never
change while the server runs. Everything else (the page, the API, uploaded files) passes through untouched.

    demo.launch(prevent_thread_lock=True); serve_assets_from_memory(demo)
"""
from __future__ import annotations

PREFIXES = ("/assets/", "/static/", "/theme.css")


class AssetCache:
    """An ASGI layer: a GET of an asset path replays the first complete 200 response it got for the same path,
    query and Accept-Encoding (the response's compression depends on it)."""

    def __init__(self, app):
        self.app = app
        self.kept: dict[tuple, list[dict]] = {}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not scope["path"].startswith(PREFIXES):
            return await self.app(scope, receive, send)
        encoding = next((value for name, value in scope["headers"] if name == b"accept-encoding"), b"")
        key = (scope["path"], scope["query_string"], encoding)
        kept = self.kept.get(key)
        if kept is not None:
            for message in kept:
                await send(message)
            return
        messages = []

        async def keep(message):
            messages.append(message)
            await send(message)

        await self.app(scope, receive, keep)
        start = messages[0] if messages else {}
        complete = messages and messages[-1].get("type") == "http.response.body" and not messages[-1].get("more_body")
        if start.get("type") == "http.response.start" and start.get("status") == 200 and complete:
            self.kept[key] = messages


def serve_assets_from_memory(demo) -> AssetCache:
    """Puts an AssetCache in front of a launched Blocks' app (outside all of Gradio's middleware)."""
    app = demo.app
    stack = app.middleware_stack if app.middleware_stack is not None else app.build_middleware_stack()
    if not isinstance(stack, AssetCache):
        app.middleware_stack = AssetCache(stack)
    return app.middleware_stack
