"""Gradio's frontend files answered from memory (explorer/asset_cache.py): the same bytes and headers as the app
behind it gave, per Accept-Encoding, and nothing else kept."""
import asyncio
import urllib.request

import pytest

from explorer.asset_cache import AssetCache, serve_assets_from_memory


class CountingApp:
    """An ASGI app that answers every request with a body naming the path, its call count and the encoding asked,
    in two chunks; /missing answers 404."""

    def __init__(self):
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        encoding = dict(scope["headers"]).get(b"accept-encoding", b"")
        status = 404 if scope["path"] == "/assets/missing.js" else 200
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"x-call", str(self.calls).encode())]}
        )
        await send({"type": "http.response.body", "body": scope["path"].encode() + b"|", "more_body": True})
        await send({"type": "http.response.body", "body": encoding, "more_body": False})


def get(app, path, method="GET", encoding=b"br", query=b""):
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": method, "path": path, "query_string": query,
             "headers": [(b"accept-encoding", encoding)]}
    asyncio.run(app(scope, receive, send))
    return sent


def body(messages) -> bytes:
    return b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")


def test_an_asset_is_answered_once_by_the_app_then_from_memory():
    inner = CountingApp()
    cache = AssetCache(inner)
    first = get(cache, "/assets/Index-abc.js")
    assert inner.calls == 1 and body(first) == b"/assets/Index-abc.js|br"
    assert get(cache, "/assets/Index-abc.js") == first and inner.calls == 1  # replayed: headers, chunks, all
    # another encoding, query or path is another response
    assert body(get(cache, "/assets/Index-abc.js", encoding=b"gzip")) == b"/assets/Index-abc.js|gzip"
    get(cache, "/theme.css", query=b"v=1")
    get(cache, "/theme.css", query=b"v=2")
    assert inner.calls == 4


@pytest.mark.parametrize("path, method", [("/", "GET"), ("/gradio_api/queue/join", "POST"), ("/gradio_api/info", "GET"),
                                          ("/assets/Index-abc.js", "HEAD"), ("/assets/missing.js", "GET")])
def test_everything_else_reaches_the_app_every_time(path, method):
    inner = CountingApp()
    cache = AssetCache(inner)
    answers = [get(cache, path, method) for _ in range(3)]
    assert inner.calls == 3
    assert [dict(a[0]["headers"])[b"x-call"] for a in answers] == [b"1", b"2", b"3"]


@pytest.mark.slow
def test_the_apps_assets_come_back_byte_for_byte():
    from .app_server import running_app

    with running_app() as (app, url):
        html = urllib.request.urlopen(url).read().decode()
        asset = url.rstrip("/") + "/" + html.split('src="./assets/')[1].split('"')[0].join(["assets/", ""])

        def fetch():
            request = urllib.request.Request(asset, headers={"Accept-Encoding": "br"})
            with urllib.request.urlopen(request) as response:
                return response.status, response.headers.get("Content-Encoding"), response.read()

        direct = fetch()
        cache = serve_assets_from_memory(app.demo)
        assert serve_assets_from_memory(app.demo) is cache  # once
        assert fetch() == direct and fetch() == direct
        assert len(cache.kept) == 1 and direct[0] == 200
        assert urllib.request.urlopen(url).read().decode() == html  # the page itself is not kept
