"""Every JSON route of the app, found in its own /openapi.json (so a new route is covered without editing this file),
against every kind of bad body: each failure is a 4xx of the one shape `{"error": {"field", "message"}}` naming
the field at fault, never FastAPI's own `{"detail": ...}` and never a 500. And each body field's description states
the bounds the route enforces."""
import json
import re
import warnings
from types import SimpleNamespace

import pytest
from fastapi import FastAPI

from explorer.http_api import MAX_BODY_BYTES, add_json_routes

SENTENCE = "The boat is on the river."
POINT = "encoder_layers.3.output"  # the shipped en-de dictionary's point
# a value that works for each field a route requires; a new route with a required field not here fails, saying so
GOOD = {"text": SENTENCE, "model": "en-de", "point": POINT, "latent": 3964, "piece": 2}
SURROGATE = "a \ud800 dog"  # character 3 is a lone surrogate; json.dumps writes it as the escape "\ud800"
JSON = {"Content-Type": "application/json"}


def listed_routes() -> dict:
    """{(method, path): the body's JSON schema or None}, read from /openapi.json of an app with the JSON routes
    (their handlers are never called here, so no model is loaded)."""
    app = FastAPI()
    add_json_routes(app, SimpleNamespace())
    schema = app.openapi()
    found = {}
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not path.startswith("/api/"):
                continue
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            found[(method.upper(), path)] = body and schema["components"]["schemas"][body["$ref"].split("/")[-1]]
    return found


ROUTES = listed_routes()
POSTS = {path: body for (method, path), body in ROUTES.items() if method == "POST"}
FIELDS = [(path, name) for path, body in POSTS.items() for name in body["properties"]]


def json_types(field: dict) -> set[str]:
    """The JSON types a field's schema accepts ("number" accepts integers too)."""
    types = {part.get("type") for part in field.get("anyOf", [field])}
    return types | ({"integer"} if "number" in types else set())


def good_body(path: str) -> dict:
    body = POSTS[path]
    missing = [name for name in body.get("required", []) if name not in GOOD]
    assert not missing, f"add a good value for {missing} (required by {path}) to GOOD"
    return {name: GOOD[name] for name in body["properties"] if name in GOOD}


@pytest.fixture(scope="module")
def client(json_api):
    return json_api[1]


def post(client, path: str, body) -> tuple[int, dict]:
    """Sends `body` (raw bytes, or a value written by json.dumps) and checks the one error shape."""
    content = body if isinstance(body, bytes) else json.dumps(body)
    answer = client.post(path, content=content, headers=JSON)
    assert answer.status_code < 500, answer.text
    if answer.status_code >= 400:
        assert set(answer.json()) == {"error"} and set(answer.json()["error"]) == {"field", "message"}, answer.text
        assert answer.json()["error"]["message"], answer.text
    return answer.status_code, answer.json()


def test_the_routes_are_found_and_are_those_the_app_serves(json_api):
    served = set(json_api[1].get("/openapi.json").json()["paths"])
    assert {path for _, path in ROUTES} == {path for path in served if path.startswith("/api/")}
    assert {"/api/v1/translate", "/api/v1/features/explain"} <= set(POSTS)  # the discovery finds what is known


def test_the_routes_are_added_once():
    """A second call (a server started again) adds nothing: FastAPI warns of a route listed twice."""
    app = FastAPI()
    add_json_routes(app, SimpleNamespace())
    add_json_routes(app, SimpleNamespace())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert {path for path in app.openapi()["paths"] if path.startswith("/api/")} == {path for _, path in ROUTES}


@pytest.mark.parametrize("path", [path for method, path in ROUTES if method == "GET"])
def test_every_get_route_answers_json(client, path):
    answer = client.get(path)
    assert answer.status_code == 200 and isinstance(answer.json(), dict), answer.text


UNREADABLE = [  # (what, the raw body, a phrase the message must hold)
    ("not UTF-8", b'{"text": "caf\xe9"}', "not valid UTF-8 text: byte 14 is 0xE9"),
    ("nested 20,000 deep", b"[" * 20_000 + b"]" * 20_000, "nested too deeply"),
    ("an object nested 10,000 deep", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "nested too deeply"),
    ("cut short", b'{"text": ', "not valid JSON"),
    ("not JSON", b"text=A dog.", "not valid JSON"),
    ("empty", b"", "must be a JSON object"),
    ("a list", b'["A dog."]', "must be a JSON object"),
    ("a string", b'"A dog."', "must be a JSON object"),
    ("a number", b"42", "must be a JSON object"),
    ("null", b"null", "must be a JSON object"),
]


@pytest.mark.parametrize("path", POSTS)
@pytest.mark.parametrize("what, raw, phrase", UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_a_body_that_is_no_json_object_is_a_400_of_the_one_shape(client, path, what, raw, phrase):
    status, answer = post(client, path, raw)
    assert (status, answer["error"]["field"]) == (400, None) and phrase in answer["error"]["message"], answer


@pytest.mark.parametrize("path", POSTS)
def test_a_stream_that_breaks_off_is_a_400(client, path):
    def chunks():
        yield b'{"text": "A dog'
        raise ConnectionResetError("the client went away")

    answer = client.post(path, content=chunks(), headers=JSON)
    assert answer.status_code == 400 and answer.json()["error"]["field"] is None, answer.text
    assert "could not be read to its end (ConnectionResetError)" in answer.json()["error"]["message"]


@pytest.mark.parametrize("path", POSTS)
def test_a_body_not_sent_as_json_or_too_large_is_refused_in_the_one_shape(client, path):
    answer = client.post(path, content=json.dumps(good_body(path)), headers={"Content-Type": "text/plain"})
    assert answer.status_code == 415 and "application/json" in answer.json()["error"]["message"]
    status, answer = post(client, path, b'{"text": "' + b"a" * MAX_BODY_BYTES + b'"}')
    assert status == 413 and answer["error"]["field"] is None

    def chunks():  # no Content-Length: counted as it arrives
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024

    answer = client.post(path, content=chunks(), headers=JSON)
    assert answer.status_code == 413 and answer.json()["error"]["field"] is None


@pytest.mark.parametrize("path", POSTS)
def test_an_unknown_key_is_named_and_one_that_is_no_text_is_said_to_be_so(client, path):
    fields = sorted(POSTS[path]["properties"])
    status, answer = post(client, path, good_body(path) | {"colour": "red"})
    assert (status, answer["error"]["field"]) == (422, "colour") and str(fields) in answer["error"]["message"]
    status, answer = post(client, path, good_body(path) | {"\ud800": 1})
    assert (status, answer["error"]["field"]) == (422, None), answer
    assert answer["error"]["message"] == ("the body has a key that is not valid Unicode text: character 1 is a lone "
                                          f"surrogate (U+D800), half of a character; the fields are {fields}")


@pytest.mark.parametrize("path", POSTS)
def test_each_missing_required_field_is_named(client, path):
    for name in POSTS[path].get("required", []):
        body = good_body(path)
        del body[name]
        status, answer = post(client, path, body)
        assert (status, answer["error"]["field"]) == (422, name) and f"{name} is required" in answer["error"]["message"]


@pytest.mark.parametrize("path, name", FIELDS)
def test_each_field_of_the_wrong_json_type_is_named(client, path, name):
    accepted = json_types(POSTS[path]["properties"][name])
    wrong = next(value for value, kind in (([], "array"), (42, "integer"), ({}, "object")) if kind not in accepted)
    status, answer = post(client, path, good_body(path) | {name: wrong})
    assert (status, answer["error"]["field"]) == (422, name), answer


@pytest.mark.parametrize("path, name", FIELDS)
def test_a_lone_surrogate_anywhere_in_a_field_is_named(client, path, name):
    """Text in the field itself where it takes text, else inside the list or object it takes, or in its place."""
    field = POSTS[path]["properties"][name]
    accepted = json_types(field)
    value = SURROGATE if "string" in accepted else [SURROGATE] if "array" in accepted else (
        {SURROGATE: 1} if "object" in accepted else SURROGATE)
    status, answer = post(client, path, good_body(path) | {name: value})
    assert (status, answer["error"]["field"]) == (422, name), answer
    if accepted & {"string", "array", "object"} and "integer" not in json.dumps(field):  # text is what it takes
        assert answer["error"]["message"] == (f"{name} is not valid Unicode text: character 3 is a lone surrogate "
                                              "(U+D800), half of a character")


@pytest.mark.parametrize("path, name", FIELDS)
def test_a_field_nested_as_deep_as_json_parses_is_a_4xx(client, path, name):
    """900 lists deep: within what Python's JSON parser reads (about 1,000), deeper than a recursive check of the
    body's text could go inside the server's stack."""
    others = json.dumps({key: value for key, value in good_body(path).items() if key != name})
    nested = f'{others[:-1]}{", " if others != "{}" else ""}"{name}": {"[" * 900}{"]" * 900}}}'
    status, answer = post(client, path, nested.encode())
    assert (status, answer["error"]["field"]) == (422, name), answer


def stated_bounds(description: str) -> tuple[float | None, float | None]:
    """(lowest, highest) as a field's description states them: "1 to 1,000", "-100 to 100", "from 1"."""
    number = r"(-?\d[\d,]*(?:\.\d+)?)"
    both = re.search(rf"{number} to {number}", description)
    if both:
        return tuple(float(part.replace(",", "")) for part in both.groups())
    lowest = re.search(rf"from {number}", description)
    return (float(lowest.group(1).replace(",", "")) if lowest else None), None


BOUNDED = [(path, name, *stated_bounds(field.get("description", ""))) for path, body in POSTS.items()
           for name, field in body["properties"].items() if json_types(field) & {"integer", "number"}
           and json_types(field) <= {"integer", "number", "null"} and stated_bounds(field.get("description", ""))[0]
           is not None]


def test_the_bounded_fields_are_found():
    found = {(path.rsplit("/", 1)[-1], name) for path, name, _, _ in BOUNDED}
    assert {("translate", "max_length"), ("latent", "contexts"), ("explain", "exact"), ("read", "top"),
            ("steer", "scale"), ("explain", "piece")} <= found, found


@pytest.mark.parametrize("path, name, lowest, highest", BOUNDED)
def test_each_field_description_states_the_bounds_the_route_enforces(client, path, name, lowest, highest):
    kind = int if "integer" in json_types(POSTS[path]["properties"][name]) else float
    step = 1 if kind is int else 0.5
    for value, refused in [(lowest - step, True), (lowest, False)] + (
            [] if highest is None else [(highest, False), (highest + step, True)]):
        status, answer = post(client, path, good_body(path) | {name: kind(value)})
        named = status == 422 and answer["error"]["field"] == name
        assert named == refused, (value, answer)
