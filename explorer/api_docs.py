"""The JSON API's reference page, `/docs`: Swagger UI over the app's own /openapi.json, served offline.

FastAPI's own docs page loads Swagger UI from a CDN, and Gradio switches it off (`docs_url=None`), so /docs answered
404. Here every file the page loads comes from the `fastapi_offline` package (its copy of Swagger UI 5, which reads
the OpenAPI 3.1 FastAPI writes; Apache-2.0, the package MIT) and is served from this server: the page works with no
network, as the app does. The page is FastAPI's base layout, with Swagger UI's online validator badge off (it would
fetch from validator.swagger.io).
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from .http_api_shapes import ApiError, error_response

TITLE = "Attention Explorer"
DOCS = "/docs"
STATIC = f"{DOCS}/static"
# the only files the page loads; nothing else of the package's folder is served
FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "favicon.png": "image/png"}
FOLDER = Path(fastapi_offline.__file__).parent / "static"


def page(title: str = TITLE) -> str:
    """The reference page: Swagger UI's base layout over /openapi.json, every file from STATIC."""
    options = {"url": "/openapi.json", "dom_id": "#swagger-ui", "layout": "BaseLayout", "deepLinking": True,
               "validatorUrl": None}
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{html.escape(title)}: JSON API</title>
<link rel="stylesheet" href="{STATIC}/swagger-ui.css">
<link rel="icon" type="image/png" href="{STATIC}/favicon.png">
</head>
<body>
<main id="swagger-ui"></main>
<script src="{STATIC}/swagger-ui-bundle.js"></script>
<script>
const options = {json.dumps(options)};
window.ui = SwaggerUIBundle({{...options, presets: [SwaggerUIBundle.presets.apis]}});
</script>
</body>
</html>
"""


def docs_router(title: str = TITLE) -> APIRouter:
    """GET /docs (the page) and GET /docs/static/NAME (its three files), none listed in /openapi.json."""
    router = APIRouter(include_in_schema=False)

    @router.get(DOCS)
    async def docs() -> HTMLResponse:
        return HTMLResponse(page(title))

    @router.get(STATIC + "/{name}")
    async def static(name: str) -> Response:
        if name not in FILES:  # in the JSON API's one error shape
            return error_response(ApiError(404, "name", f"no such file of the docs page: {name!r}; it loads "
                                                        f"{sorted(FILES)}"))
        # the page's files change only with the package: a browser may keep them for a day
        return FileResponse(FOLDER / name, media_type=FILES[name],
                            headers={"Cache-Control": "public, max-age=86400"})

    return router


__all__ = ["DOCS", "FILES", "FOLDER", "docs_router"]
