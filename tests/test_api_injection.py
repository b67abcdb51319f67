"""Every API argument of every endpoint, sent markup, numbers that are not finite and values of the wrong kind, through
a running app: what comes back shows the visitor's value as text and names the argument, the range as the API
counts it and the value as sent."""
import html
import json
import math
import re
import urllib.request

import markdown
import pytest

from .app_server import running_app
from .test_injection import MARKUP, rendered

pytestmark = pytest.mark.slow

SENTENCE = "A dog runs in the park."
REQUEST_STRINGS = ("model", "device", "strategy", "prefix", "heads_off")
# endpoint -> its own arguments besides the request's (defaults that work)
ENDPOINTS = {"/translate": {}, "/translate_trace": {}, "/translate_details": {},
             "/why_not": {"foil": "▁Katze"}, "/query_key": {"kind": "cross"}, "/walkthrough": {}}
OWN_NUMBERS = {"/why_not": ("step", "sentence"), "/query_key": ("layer", "head", "query", "sentence"),
               "/walkthrough": ("token", "step", "head", "layer", "sentence")}
EVIL_TAGS = {"form", "input", "img", "svg", "a", "script", "iframe"}


class RawClient:
    """Gradio's HTTP API without a client library on top: the body is JSON as Python writes it, so NaN and
    Infinity reach the server as a browser's or a script's raw JSON can send them (gradio_client refuses them)."""

    def __init__(self, url: str):
        self.url = url.rstrip("/")
        info = json.loads(urllib.request.urlopen(f"{self.url}/gradio_api/info", timeout=60).read())
        self.parameters = {name: {p["parameter_name"]: p.get("parameter_default") for p in endpoint["parameters"]}
                           for name, endpoint in info["named_endpoints"].items()}

    def call(self, endpoint: str, **arguments):
        """(result, None) or (None, the error message)."""
        names = self.parameters[endpoint]
        assert set(arguments) <= set(names), f"{endpoint} has no {set(arguments) - set(names)}"
        kind, data = self.raw(endpoint, [arguments.get(name, default) for name, default in names.items()])
        return (data[0], None) if kind == "complete" else (None, str(data))

    def raw(self, endpoint: str, data: list) -> tuple[str, dict | list]:
        """(event kind, its data) for a body of exactly `data`, as a script builds it by hand."""
        body = json.dumps({"data": data}).encode("utf-8")
        post = urllib.request.Request(f"{self.url}/gradio_api/call{endpoint}", body,
                                      {"Content-Type": "application/json"})
        event = json.loads(urllib.request.urlopen(post, timeout=60).read())["event_id"]
        stream = urllib.request.urlopen(f"{self.url}/gradio_api/call{endpoint}/{event}", timeout=120).read()
        kind = None
        for line in stream.decode("utf-8").splitlines():
            if line.startswith("event: "):
                kind = line[len("event: "):]
            elif line.startswith("data: ") and kind in ("complete", "error"):
                return kind, json.loads(line[len("data: "):])
        raise AssertionError(f"no result in {endpoint}'s event stream: {stream[:300]!r}")


@pytest.fixture(scope="module")
def client():
    with running_app() as (_, url):
        yield RawClient(url)


def error_of(client, endpoint, **arguments) -> str | None:
    """The error message the endpoint answers with, or None when it answered."""
    return client.call(endpoint, **arguments)[1]


def assert_text_only(message: str, value: str) -> None:
    """No element of the visitor's making in the message as the page renders it (HTML), and the value reads back."""
    assert not EVIL_TAGS & set(rendered(message).tags), message
    assert html.unescape(value) in html.unescape(message) or "<" not in message


@pytest.mark.parametrize("endpoint, name", [(endpoint, name) for endpoint, own in ENDPOINTS.items()
                                            for name in REQUEST_STRINGS + tuple(own)])
def test_markup_in_any_string_argument_comes_back_as_text(client, endpoint, name):
    value = MARKUP[0] if name != "heads_off" else "cross 1 1; " + MARKUP[0]
    # a forced start as text may well be valid: as pieces, markup is none of the vocabulary's
    arguments = {"text": SENTENCE, **ENDPOINTS[endpoint], name: [value] if name == "prefix" else value}
    message = error_of(client, endpoint, **arguments)
    assert message is not None  # none of these values is valid for these arguments
    assert "<form" not in message and "&lt;form" in message
    assert_text_only(message, value)


@pytest.mark.parametrize("value", MARKUP)
def test_markup_in_the_text_is_text_in_the_summary(client, value):
    out, _ = client.call("/translate", text=value)
    page = rendered(markdown.markdown(out["summary"]))
    assert set(page.tags) <= {"p", "strong", "em"}, page.tags


def test_markup_in_a_forced_start_is_text_in_the_summary(client):
    prefix = "[log in](https://evil.example) <img src=https://evil.example/p.png>"
    out, _ = client.call("/translate", text=SENTENCE, prefix=prefix, max_length=128)
    page = rendered(markdown.markdown(out["summary"]))
    assert set(page.tags) <= {"p", "strong", "em"} and prefix in "".join(page.text)


NOT_NUMBERS = [math.nan, math.inf, -math.inf, "3", True, [2], 2.5]


@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_max_length_that_is_no_finite_whole_number_is_named(client, endpoint, value):
    message = error_of(client, endpoint, text=SENTENCE, **ENDPOINTS[endpoint], max_length=value)
    assert message is not None and "max_length must be an integer in [1, 128], got" in message, message
    assert "Translation failed" not in message


@pytest.mark.parametrize(
    "setting, strategy, low, high",
    [
        ("beam_size", "beam", 1, 8),
        ("length_penalty", "beam", 0.0, 2.0),
        ("temperature", "sample", 0.05, 5.0),
        ("top_k", "sample", 0, 1000),
        ("top_p", "sample", 0.05, 1.0),
        ("seed", "sample", 0, 2147483647),
    ],
)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "3", True], ids=repr)
def test_strategy_settings_that_are_no_finite_numbers_are_named(client, setting, strategy, low, high, value):
    message = error_of(client, "/translate", text=SENTENCE, strategy=strategy, settings={setting: value})
    assert message is not None and re.search(rf"{setting} must be an? \w+ in \[{low}, {high}\], got", message), message


@pytest.mark.parametrize("endpoint", OWN_NUMBERS)
@pytest.mark.parametrize("value", NOT_NUMBERS + [0, -1], ids=repr)
def test_numbers_counted_from_1_are_named_with_their_range(client, endpoint, value):
    for name in OWN_NUMBERS[endpoint]:
        message = error_of(client, endpoint, text=SENTENCE, **ENDPOINTS[endpoint], **{name: value})
        assert message is not None and f"{name} must be" in message and "(the API counts" in message, message
        assert "Translation failed" not in message


def test_query_key_ranges_are_counted_as_the_api_counts(client):
    details, _ = client.call("/translate_details", text=SENTENCE)
    sentence = details["sentences"][0]
    layers, heads, queries = sentence["attention"]["cross"]["shape"][:3]
    for name, value, high in (("layer", 99, layers), ("head", 99, heads), ("query", 999, queries)):
        message = error_of(client, "/query_key", text=SENTENCE, kind="cross", **{name: value})
        assert f"{name} must be in [1, {high}], got {value}" in message, message
    message = error_of(client, "/query_key", text=SENTENCE, kind="encoder_self", query=len(sentence["src_tokens"]) + 1)
    assert f"query must be in [1, {len(sentence['src_tokens'])}]" in message
    out, _ = client.call("/query_key", text=SENTENCE, kind="cross", layer=layers, head=heads, query=1)
    assert (out["layer"], out["head"], out["query"]) == (layers, heads, 1)


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_omitted_optional_arguments_take_their_defaults(client, endpoint):
    """A body that sends only the required values (Gradio answered an error whose message was null) is answered
    as if every other argument had its default; one that leaves out a required one names it."""
    own = ENDPOINTS[endpoint]
    required = [SENTENCE] + ([own["foil"]] if endpoint == "/why_not" else [])
    kind, data = client.raw(endpoint, required)
    assert kind == "complete", data
    full, error = client.call(endpoint, text=SENTENCE, **own)
    timing = ("summary", "milliseconds")  # the second answer comes from the result cache, and says so
    assert error is None and {k: v for k, v in data[0].items() if k not in timing} == {
        k: v for k, v in full.items() if k not in timing}  # the same answer as with every default sent
    kind, data = client.raw(endpoint, [])
    assert kind == "error" and data["error"] == (
        f"{endpoint} is missing its required argument(s) {'text, foil' if endpoint == '/why_not' else 'text'}")


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
@pytest.mark.parametrize("argument", ["text", *REQUEST_STRINGS])
def test_text_that_is_not_valid_unicode_is_refused_by_name(client, endpoint, argument):
    """A lone UTF-16 surrogate (JSON's "\\ud800", which no encoding can hold) got the generic "Translation
    failed: RuntimeError"; now the argument is named."""
    arguments = {"text": SENTENCE, **ENDPOINTS[endpoint], argument: "a \ud800 b"}
    message = error_of(client, endpoint, **arguments)
    assert message is not None and f"{argument} is not valid Unicode text: character 3 is a lone surrogate " \
                                   "(U+D800)" in message, message
