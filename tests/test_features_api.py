"""The dictionary features on the JSON API (explorer/features_api.py) against the command line on the shipped en-de
dictionary: the same steered translation and the same causes; every bad value a 422 naming its field."""
import json

import pytest

from transformer.features.cli import main

from .conftest import ROOT

POINT = "encoder_layers.3.output"
FOLDER = ROOT / "checkpoints" / "en-de" / "features" / POINT
SENTENCE = "The boat is on the river."


@pytest.fixture(scope="module")
def client(json_api):
    return json_api[1]


def command(capsys, *argv) -> dict:
    capsys.readouterr()
    main([str(a) for a in argv])
    return json.loads(capsys.readouterr().out)


def test_the_listing_names_each_shipped_dictionary_with_its_metrics(client):
    answer = client.get("/api/v1/features")
    assert answer.status_code == 200, answer.text
    listed = {d["point"]: d for d in answer.json()["models"]["en-de"]}
    config = json.loads((FOLDER / "config.json").read_text())
    assert listed[POINT]["metrics"] == config["metrics"] and listed[POINT]["n"] == config["n"]


def test_steer_and_explain_give_what_the_command_line_gives(client, capsys):
    body = {"text": SENTENCE, "model": "en-de", "point": POINT, "latent": 3964, "scale": 0.0}
    answer = client.post("/api/v1/features/steer", json=body)
    assert answer.status_code == 200, answer.text
    printed = command(capsys, "steer", FOLDER, "--sentence", SENTENCE, "--latent", 3964, "--scale", 0)
    assert (answer.json()["before"], answer.json()["after"]) == (printed["before"], printed["after"])
    assert printed["before"] != printed["after"]
    answer = client.post("/api/v1/features/explain", json={"text": SENTENCE, "point": POINT, "model": "en-de",
                                                           "piece": 3, "exact": 4})
    assert answer.status_code == 200, answer.text
    printed = command(capsys, "explain", FOLDER, "--sentence", SENTENCE, "--piece", 3, "--exact", 4)
    assert answer.json()["target"] == printed["target"]
    got = [(c["latent"], c["exact"]) for c in answer.json()["causes"]]
    want = [(c["latent"], c["exact"]) for c in printed["causes"]]
    assert [latent for latent, _ in got] == [latent for latent, _ in want]
    # the same float32 passes in one process: equal, or within float32 rounding where threads split the sums
    assert [e for _, e in got if e is not None] == pytest.approx([e for _, e in want if e is not None], abs=1e-5)


@pytest.mark.parametrize("route, change, field", [
    ("steer", {"latent": 4096}, "latent"), ("steer", {"latent": "3"}, "latent"), ("steer", {"scale": 1e9}, "scale"),
    ("steer", {"positions": [0]}, "positions"), ("steer", {"point": "decoder_layers.9.output"}, "point"),
    ("steer", {"model": "xx-yy"}, "model"), ("steer", {"text": ""}, "text"), ("steer", {"colour": 1}, "colour"),
    ("explain", {"piece": 0}, "piece"), ("explain", {"piece": 99}, "piece"), ("explain", {"exact": 101}, "exact"),
    ("explain", {"target": " "}, "target"),
    ("explain", {"target": "Das Boot.\nDer Fluss."}, "target"), ("latent", {"contexts": 1001}, "contexts"),
    ("read", {"top": 0}, "top"), ("read", {"top": 21}, "top"), ("read", {"point": "encoder"}, "point"),
    ("latent", {"latent": -1}, "latent"), ("latent", {"contexts": 0}, "contexts"), ("latent", {"text": "x"}, "text"),
])
def test_every_bad_value_is_a_422_naming_its_field(client, route, change, field):
    body = {"model": "en-de", "point": POINT} | ({} if route == "latent" else {"text": SENTENCE})
    body |= {"steer": {"latent": 1}, "explain": {"piece": 2}, "read": {}, "latent": {"latent": 1}}[route]
    answer = client.post(f"/api/v1/features/{route}", json=body | change)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == field, answer.json()


def test_read_is_the_encoding_by_hand_and_latent_what_top_prints(client, capsys):
    import torch

    from transformer import Translator
    from transformer.core.capture import record
    from transformer.features import load_dictionary

    answer = client.post("/api/v1/features/read", json={"text": SENTENCE, "model": "en-de", "point": POINT, "top": 2})
    assert answer.status_code == 200, answer.text
    translator, d = Translator.from_pretrained("en-de"), load_dictionary(FOLDER).dictionary
    with torch.no_grad(), record(translator.model, POINT) as recording:
        translator.model.encode(torch.tensor([translator.source_ids(SENTENCE)[0]]))
        x = recording[POINT][0][0].float()
        pre = (x - d.b_dec) @ d.W_enc + d.b_enc
        z = torch.where(pre >= pre.topk(d.config.k, dim=-1).values[:, -1:], pre.relu(), torch.zeros_like(pre))
    tokens = answer.json()["tokens"]
    assert len(tokens) == len(z)
    for token, row in zip(tokens, z):
        want = row.topk(2)
        assert [t["latent"] for t in token["latents"]] == want.indices.tolist()
        assert [t["activation"] for t in token["latents"]] == pytest.approx(want.values.tolist(), abs=1e-4)
    answer = client.post("/api/v1/features/latent", json={"model": "en-de", "point": POINT, "latent": 3964,
                                                          "contexts": 3})
    assert answer.status_code == 200, answer.text
    assert answer.json() == command(capsys, "top", FOLDER, "--latent", 3964, "--contexts", 3)
    assert len(answer.json()["contexts"]) == 3 and sum(answer.json()["histogram"]["counts"]) == answer.json()["active"]
