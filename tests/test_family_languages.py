"""A multilingual model's languages through every door: Translator.translate, the typed Request (page, API, link),
the JSON route and /models. A converted tiny NLLB model (hub_fixtures.py) translates between any of its codes; an
unknown code, or a code for a model of one direction, is a 422 naming the field."""
from urllib.parse import parse_qsl

import pytest

pytest.importorskip("transformers")

from fastapi import FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from explorer.http_api import add_json_routes  # noqa: E402
from explorer.registry import discover  # noqa: E402
from explorer.request import Request, RequestError  # noqa: E402
from explorer.ui_state import Wiring  # noqa: E402

from .conftest import ROOT  # noqa: E402
from .hub_fixtures import NLLB_CODES, Pair  # noqa: E402

SENTENCE = "Where is the train station?"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the NLLB pair, the page's wiring serving it beside the shipped en-de, a client of its JSON routes)."""
    root = tmp_path_factory.mktemp("served")
    pair = Pair("nllb", root)
    ui = Wiring(discover(root, [ROOT / "checkpoints" / "en-de"]), [])
    app = FastAPI()
    add_json_routes(app, ui)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield pair, ui, client


def code_id(pair, code: str) -> int:
    return pair.tokenizer.convert_tokens_to_ids(code)


def test_the_route_translates_in_the_direction_asked_as_hugging_face_encodes_it(served):
    pair, _, client = served
    answer = client.post("/api/v1/translate", json={"text": SENTENCE, "model": "nllb", "strategy": "greedy",
                                                    "source_lang": "deu_Latn", "target_lang": "fra_Latn"})
    assert answer.status_code == 200, answer.text
    trace = answer.json()["traces"][0]
    pair.tokenizer.src_lang = "deu_Latn"  # Hugging Face's own encoding of that source language
    assert trace["src"] == pair.tokenizer.convert_ids_to_tokens(pair.tokenizer(SENTENCE).input_ids)
    assert trace["tgt"][0] == "fra_Latn"
    direct = pair.ours.translate(SENTENCE, strategy="greedy", max_length=64, source_lang="deu_Latn",
                                 target_lang="fra_Latn")
    assert answer.json()["translation"] == direct.text
    models = client.get("/api/v1/models").json()
    assert models["languages"] == {"nllb": sorted(NLLB_CODES)}


@pytest.mark.parametrize("body, field", [
    ({"model": "nllb", "target_lang": "xx_Latn"}, "target_lang"),
    ({"model": "nllb", "source_lang": "english"}, "source_lang"),
    ({"model": "nllb", "target_lang": 3}, "target_lang"),
    ({"model": "en-de", "target_lang": "deu_Latn"}, "target_lang"),  # a model of one direction takes none
])
def test_a_bad_language_is_a_422_naming_its_field(served, body, field):
    answer = served[2].post("/api/v1/translate", json={"text": SENTENCE, **body})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field


def test_the_link_and_the_page_carry_the_languages(served):
    pair, ui, _ = served
    request = Request.from_api(ui.registry, SENTENCE, "nllb", source_lang="fra_Latn", target_lang="eng_Latn")
    assert Request.from_link(ui.registry, dict(parse_qsl(request.to_link()))) == request
    assert Request.from_page(ui.registry, request.page_values()) == request
    result = ui.service.run(request, frozenset())
    assert result.translations[0].tgt_ids[0] == code_id(pair, "eng_Latn")
    assert result.translations[0].src_ids[0] == code_id(pair, "fra_Latn")
    # the default: the direction the model was converted for
    default = ui.service.run(Request.from_api(ui.registry, SENTENCE, "nllb"), frozenset()).translations[0]
    assert (default.src_ids[0], default.tgt_ids[0]) == (code_id(pair, "eng_Latn"), code_id(pair, "deu_Latn"))
    with pytest.raises(RequestError) as raised:
        Request.from_api(ui.registry, SENTENCE, "nllb", target_lang="klingon")
    assert raised.value.field == "target_lang" and "3" in str(raised.value)
