"""/walkthrough on the API, against a launched server: every stage numbered from 1, its numbers the ones the
translation recorded while decoding, and each bad parameter answered with its name, range and value as sent."""
import numpy as np
import pytest
from gradio_client import Client

from transformer import Translator
from transformer.core.head_ref import from_shown

from .app_server import running_app
from .conftest import SHIPPED, recorded

pytestmark = pytest.mark.slow
SENTENCE = "A dog runs through the snow."


@pytest.fixture(scope="module")
def client():
    with running_app() as (_, url):
        yield Client(url, verbose=False)


@pytest.fixture(scope="module")
def expected():
    reference = Translator.from_pretrained(SHIPPED)
    return reference.translate(SENTENCE, capture=True, **recorded(reference))


def numbers(out, key) -> dict:
    stage = next(s for s in out["stages"] if s["key"] == key)
    return {n["name"]: n["values"] for n in stage["numbers"]}


def version(stage, layer: int, head: int, heads: int) -> dict:
    """The stage's version at `layer` and `head` (numbered from 1), checked against the numbers it carries."""
    if not stage["per"]:
        return stage
    found = [v for v in stage["variants"] if v["layer"] == layer and v.get("head", head) == head]
    assert len(found) == 1, (stage["key"], layer, head)
    return found[0]


def test_every_stage_numbered_from_1_with_the_recorded_numbers(client, expected):
    token, step, head = 3, 2, 2
    out = client.predict(SENTENCE, token, step, head, api_name="/walkthrough")
    assert [s["number"] for s in out["stages"]] == list(range(1, len(out["stages"]) + 1))
    assert (out["token"], out["step"], out["head"], out["layer"]) == (token, step, head, 1)
    assert out["token_piece"] == expected.src_tokens[token - 1] and out["step_piece"] == expected.tgt_tokens[step - 1]
    assert numbers(out, "text.pieces")["pieces"] == expected.src_tokens
    assert numbers(out, "text.pieces")["ids"] == expected.src_ids
    # the attention rows: what decoding itself recorded (first layer, the chosen head), not only the walk's own pass
    # (the server's teacher-forced pass, in its own thread, against the test's cached steps: float32 rounding)
    np.testing.assert_allclose(numbers(out, "encoder.encoder_self.softmax")["weights"],
                               expected.recorded["encoder_self"].values[0, head - 1, token - 1], atol=1e-4)
    np.testing.assert_allclose(numbers(out, "decoder.cross.softmax")["weights"],
                               expected.recorded["cross"].values[0, head - 1, step - 1], atol=1e-4)
    weights = np.array(numbers(out, "decoder.decoder_self.softmax")["all_weights"])  # every step's row
    np.testing.assert_allclose(weights, expected.recorded["decoder_self"].values[0, head - 1], atol=1e-4)
    masked = numbers(out, "decoder.decoder_self.scores")["masked_scores"]
    steps = len(expected.tgt_ids)
    assert all((masked[i][j] == "-inf") == (j > i) for i in range(steps) for j in range(steps))  # the causal mask
    # every layer and head, numbered from 1, each the attention decoding recorded
    layers, heads = out["layers"], out["heads"]
    for key, kind, query in (("encoder.encoder_self.softmax", "encoder_self", token), ("decoder.cross.softmax", "cross",
                                                                                      step)):
        stage = next(s for s in out["stages"] if s["key"] == key)
        assert stage["per"] == "head" and len(stage["variants"]) == layers * heads
        for layer in range(1, layers + 1):
            for at_head in range(1, heads + 1):
                weights = {n["name"]: n["values"] for n in version(stage, layer, at_head, heads)["numbers"]}["weights"]
                np.testing.assert_allclose(weights, expected.recorded[kind].values[  # the server's pass: as above
                    from_shown(layer), from_shown(at_head), from_shown(query)], atol=1e-4)
    residual = next(s for s in out["stages"] if s["key"] == "decoder.cross.residual")
    assert residual["per"] == "layer" and [v["layer"] for v in residual["variants"]] == list(range(1, layers + 1))
    # the whole vocabulary's logits: their softmax is the chosen piece's probability
    logits = np.array([-np.inf if v == "-inf" else v for v in out["logits"]], dtype=np.float64)
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    # the server's teacher-forced logits against the test's decoding steps: float32 rounding through the layers
    assert probs[expected.tgt_ids[step - 1]] == pytest.approx(expected.steps[step - 1].prob, abs=1e-4)
    chosen = numbers(out, "output.softmax")["chosen_probability"]
    assert chosen == pytest.approx(expected.steps[step - 1].prob, abs=1e-4)  # as the rows above
    assert all(s["text"] and s["formula"] and s["module"].startswith("transformer/") for s in out["stages"])


@pytest.mark.parametrize("arguments, message", [
    ({"token": 0}, r"token must be at least 1, got 0 \(the API counts token from 1\)"),
    ({"token": 99}, r"token must be in \[1, 8\], got 99 for this translation"),
    ({"step": 999}, r"step must be in \[1, \d+\], got 999 for this translation"),
    ({"head": 5}, r"head must be in \[1, 4\], got 5"),
    ({"token": 1.5}, r"token must be an integer at least 1, got 1.5 \(the API counts token from 1\)"),
    ({"step": "two"}, r"step must be an integer at least 1, got 'two' \(the API counts step from 1\)"),
    ({"head": True}, r"head must be an integer .*got True"),
    ({"layer": 0}, r"layer must be at least 1, got 0 \(the API counts layer from 1\)"),
    ({"layer": 9}, r"layer must be in \[1, 4\], got 9"),
    ({"sentence": 2}, r"sentence must be in \[1, 1\], got 2"),
])
def test_bad_parameters_are_named_with_the_value_sent(client, arguments, message):
    with pytest.raises(Exception, match=message):
        client.predict(**{"text": SENTENCE, **arguments}, api_name="/walkthrough")
