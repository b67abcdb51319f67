"""/docs: the JSON API's reference page (explorer/api_docs.py), offline. Every file it loads is a file of this server,
byte for byte the fastapi_offline package's; it reads the app's own /openapi.json, which does not list it; any
other name under it is a 404 of the API's one error shape."""
import re

import pytest

from explorer.api_docs import FILES, FOLDER

pytestmark = pytest.mark.slow  # the shipped models' wiring (conftest.json_api)


def loaded(page: str) -> list[str]:
    """Every address the page's HTML loads or links: src and href attributes, and any absolute URL in its script."""
    return re.findall(r'(?:src|href)="([^"]+)"', page) + re.findall(r"\w+://[^\s\"'<>]+", page)


def test_every_file_the_page_loads_is_this_servers(json_api):
    _, client = json_api
    answer = client.get("/docs")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    addresses = loaded(answer.text)
    assert sorted(addresses) == sorted(f"/docs/static/{name}" for name in FILES), addresses  # no CDN, no other host
    for name, kind in FILES.items():
        file = client.get(f"/docs/static/{name}")
        assert file.status_code == 200 and file.headers["content-type"].startswith(kind), name
        assert file.content == (FOLDER / name).read_bytes(), name
    assert '"url": "/openapi.json"' in answer.text and '"validatorUrl": null' in answer.text


def test_the_listing_it_reads_has_the_routes_and_not_the_page(json_api):
    _, client = json_api
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/v1/translate" in paths and "/api/v1/features/explain" in paths
    assert not [path for path in paths if path.startswith("/docs")]


@pytest.mark.parametrize("name", ["redoc.standalone.js", "index.html", "swagger-ui-bundle.js.map", "%2e%2e"])
def test_any_other_name_is_a_404_of_the_one_shape(json_api, name):
    _, client = json_api
    answer = client.get(f"/docs/static/{name}")
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["field"] == "name" and "swagger-ui.css" in error["message"]
