"""/docs in Chromium: Swagger UI draws every route of the app's own /openapi.json, and the page asks nothing
of any host but this server (the app works offline; explorer/api_docs.py)."""
from urllib.parse import urlsplit

import pytest

from .test_browser import CHROMIUM, TIMEOUT, browser, server_url  # noqa: F401

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium missing (scripts/test.sh installs it)")]


def test_the_reference_page_lists_every_route_from_this_server_alone(browser, server_url):  # noqa: F811
    from playwright.sync_api import expect

    listed = sorted(browser_json(browser, server_url + "openapi.json")["paths"])  # Gradio's own routes too
    page = browser.new_page()
    asked, errors = [], []
    page.on("request", lambda request: asked.append(request.url))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(server_url + "docs")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible(timeout=TIMEOUT)
    drawn = sorted(set(page.locator(".swagger-ui .opblock-summary-path").evaluate_all(
        "paths => paths.map(p => p.getAttribute('data-path'))")))
    page.close()
    assert drawn == listed and "/api/v1/translate" in drawn
    assert {urlsplit(url).netloc for url in asked} == {urlsplit(server_url).netloc}, asked
    assert errors == []


def browser_json(browser, url: str) -> dict:  # noqa: F811
    page = browser.new_page()
    try:
        return page.goto(url).json()
    finally:
        page.close()
