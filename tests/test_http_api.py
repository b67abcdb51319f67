"""The JSON route POST /api/v1/translate (explorer/http_api.py): the same translation and trace as the model itself
gives, and every bad body answered by a 4xx whose JSON names the field, never a 5xx; a full server by a 503 with
Retry-After."""
import base64
import json
import threading
import time
import zlib

import numpy as np
import pytest

from explorer.http_api import MAX_BODY_BYTES
from explorer.result_cache import ResultCache
from explorer.session import ModelService
from transformer import Translator

from .conftest import SHIPPED, recorded

ROUTE = "/api/v1/translate"
SENTENCE = "A dog runs through the snow."


@pytest.fixture(scope="module")
def page(json_api):
    return json_api


@pytest.fixture(scope="module")
def reference():
    return Translator.from_pretrained(SHIPPED)


def unpacked(kind: dict, layers: int, heads: int) -> np.ndarray:
    raw = np.frombuffer(zlib.decompress(base64.b64decode(kind["q"])), np.uint8)
    return raw.reshape(layers, heads, len(kind["rows"]), len(kind["cols"])) / 255


def test_the_route_translates_as_the_model_does_with_every_attention_map(page, reference):
    ui, client = page
    answer = client.post(ROUTE, json={"text": SENTENCE, "model": "en-de"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    alone = reference.translate(SENTENCE, capture=True, **recorded(reference))
    assert body["translation"] == alone.text and body["translations"] == [alone.text]
    trace = body["traces"][0]
    assert trace["src"] == alone.src_tokens and trace["tgt"] == alone.tgt_tokens
    for kind in ("encoder_self", "decoder_self", "cross"):
        got = unpacked(trace["kinds"][kind], trace["kinds"][kind]["layers"], trace["kinds"][kind]["heads"])
        # bytes in 1/255 steps: within half a step of the weights, plus float32 rounding across threads
        np.testing.assert_allclose(got, alone.recorded[kind].values, atol=0.5 / 255 + 1e-6)
    # the page's tabs adopt the result by its key
    assert ui.adopt(body["result_key"]).translations[0].text == alone.text
    strategy, settings = reference.recorded_decoding()
    assert body["strategy"] == strategy and {k: body["settings"][k] for k in settings} == settings


def test_settings_and_several_lines_reach_the_model(page, reference):
    _, client = page
    text = "A man rides a bike.\nTwo girls play in the park."
    body = client.post(ROUTE, json={"text": text, "strategy": "beam",
                                    "settings": {"beam_size": 2, "length_penalty": 1.0}, "max_length": 20}).json()
    want = [reference.translate(line, strategy="beam", beam_size=2, length_penalty=1.0, max_length=20).text
            for line in text.splitlines()]
    assert body["translations"] == want and len(body["traces"]) == 2
    assert body["settings"]["beam_size"] == 2 and body["settings"]["max_length"] == 20


LONG = "a" * 2001
BAD = [  # (what is sent: a JSON value, or raw bytes), the status, the field named (None: the body as a whole)
    (b"{\"text\": ", 400, None),
    (b"[\"A dog.\"]", 400, None),
    (b"\"A dog.\"", 400, None),
    (b"", 400, None),
    ({}, 422, "text"),
    ({"text": ""}, 422, "text"),
    ({"text": "   \n  "}, 422, "text"),
    ({"text": 42}, 422, "text"),
    ({"text": ["A dog."]}, 422, "text"),
    ({"text": LONG}, 422, "text"),
    ({"text": "\n".join(["A dog."] * 9)}, 422, "text"),
    (b"{\"text\": \"A dog \\ud800 runs.\"}", 422, "text"),
    ({"text": "A dog.", "model": "xx-yy"}, 422, "model"),
    ({"text": "A dog.", "model": ["en-de"]}, 422, "model"),
    ({"text": "A dog.", "device": "tpu"}, 422, "device"),
    ({"text": "A dog.", "strategy": "best"}, 422, "strategy"),
    ({"text": "A dog.", "strategy": "beam", "settings": {"beam_size": 99}}, 422, "beam.beam_size"),
    ({"text": "A dog.", "strategy": "greedy", "settings": {"beam_size": 2}}, 422, "settings"),
    ({"text": "A dog.", "settings": [4]}, 422, "settings"),
    ({"text": "A dog.", "max_length": 0}, 422, "max_length"),
    ({"text": "A dog.", "max_length": "64"}, 422, "max_length"),
    ({"text": "A dog.", "max_length": 1e9}, 422, "max_length"),
    ({"text": "A dog.", "heads_off": "cross 9 9"}, 422, "heads_off"),
    ({"text": "A dog.", "heads_off": "nonsense"}, 422, "heads_off"),
    ({"text": "A dog.", "prefix": "\ud800"}, 422, "prefix"),
    ({"text": "A dog.", "colour": "red"}, 422, "colour"),
    (b"{\"text\": \"" + b"a" * (MAX_BODY_BYTES + 10) + b"\"}", 413, None),
]


@pytest.mark.parametrize("sent,status,field", BAD, ids=[f"{i}-{s}-{f}" for i, (_, s, f) in enumerate(BAD)])
def test_every_bad_body_gets_a_4xx_naming_the_field(page, sent, status, field):
    _, client = page
    if isinstance(sent, bytes):
        answer = client.post(ROUTE, content=sent, headers={"Content-Type": "application/json"})
    else:  # json.dumps writes a lone surrogate as the escape "\ud800", as a browser's JSON.stringify does
        answer = client.post(ROUTE, content=json.dumps(sent), headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["field"] == field and error["message"]
    if field is not None and field != "text":
        assert field.split(".")[-1] in error["message"] or field == "settings"


def test_a_body_not_sent_as_json_is_named(page):
    _, client = page
    answer = client.post(ROUTE, content=b'{"text": "A dog."}', headers={"Content-Type": "text/plain"})
    assert answer.status_code == 415 and "application/json" in answer.json()["error"]["message"]


def test_a_body_streamed_without_a_length_is_still_bounded(page):
    _, client = page

    def chunks():
        for _ in range(MAX_BODY_BYTES // 1024 + 2):
            yield b" " * 1024

    answer = client.post(ROUTE, content=chunks(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and answer.json()["error"]["field"] is None


def test_past_the_services_bound_the_route_answers_503_with_retry_after_at_once(page, monkeypatch):
    """The real bound (explorer/batching.py), with no work allowed to wait: one request decodes (held), a second
    waits for the slot, and a third is refused at once while both are still held; then both are answered."""
    ui, client = page
    service = ModelService(ui.registry, ResultCache(0), bound_s=0.0, admitted_lines=0)
    decode, holding, release = service.run_batch, threading.Semaphore(0), threading.Event()

    def held(requests, analyses):
        holding.release()
        release.wait(60)
        return decode(requests, analyses)

    monkeypatch.setattr(service, "run_batch", held)
    monkeypatch.setattr(service.batcher, "decode", held)
    monkeypatch.setattr(ui, "service", service)
    answers = {}

    def send(name, text):
        answers[name] = client.post(ROUTE, json={"text": text})

    first = threading.Thread(target=send, args=("first", "A dog runs."))
    first.start()
    assert holding.acquire(timeout=60)  # the first decodes
    second = threading.Thread(target=send, args=("second", "A cat sleeps."))
    second.start()
    deadline = time.monotonic() + 60
    while service.batcher.waiting_lines() < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    refused = client.post(ROUTE, json={"text": "A bird sings."})
    assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
    assert refused.json()["error"]["field"] is None and "Try again in" in refused.json()["error"]["message"]
    release.set()
    first.join(60)
    second.join(60)
    assert answers["first"].status_code == 200 and answers["second"].status_code == 200


def test_a_failure_inside_is_a_500_with_a_message_not_a_traceback(page, monkeypatch):
    ui, client = page

    def broken(request, analyses):
        raise RuntimeError("the model fell over")

    monkeypatch.setattr(ui.service, "run", broken)
    answer = client.post(ROUTE, json={"text": SENTENCE})
    assert answer.status_code == 500 and answer.json()["error"]["message"] == "Translation failed: RuntimeError."


def test_openapi_lists_the_routes_with_their_schemas(page):
    _, client = page
    schema = client.get("/openapi.json").json()
    post = schema["paths"][ROUTE]["post"]
    body_ref = post["requestBody"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    body = schema["components"]["schemas"][body_ref]
    assert body["required"] == ["text"] and body["additionalProperties"] is False
    assert {"text", "model", "strategy", "settings", "max_length", "prefix", "heads_off"} <= set(body["properties"])
    answer_ref = post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
    assert {"translation", "traces", "result_key"} <= set(schema["components"]["schemas"][answer_ref]["properties"])
    assert {"400", "413", "415", "422", "503"} <= set(post["responses"])
    assert client.get("/api/v1/models").json()["default"] in client.get("/api/v1/models").json()["models"]


def test_the_routes_answer_as_soon_as_a_launched_page_does(page):
    """Launched with `adding_routes_at_start` (as app.py launches): the routes are there for the first request after
    `launch()` returns, from a server started on a page that had none."""
    import urllib.request

    import gradio as gr

    from explorer.http_api import adding_routes_at_start

    ui, _ = page
    with gr.Blocks() as demo:
        gr.Markdown("a page")
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, server_name="127.0.0.1", server_port=None,
                            app_kwargs={"lifespan": adding_routes_at_start(ui)})
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/v1/models", timeout=30) as answer:
            listed = json.loads(answer.read())
        assert answer.status == 200
        assert listed == {"models": sorted(ui.registry.models), "default": ui.registry.default_key, "languages": {}}
    finally:
        demo.close()
