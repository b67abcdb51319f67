"""The app's named API endpoints through gradio_client, against a launched server."""
import numpy as np
import pytest
from gradio_client import Client

from transformer import Translator

from .app_server import running_app
from .conftest import SHIPPED


@pytest.fixture(scope="module")
def server():
    with running_app() as (app, url):
        yield app, Client(url, verbose=False)


@pytest.fixture(scope="module")
def reference():
    return Translator.from_pretrained(SHIPPED)


SENTENCE = "A dog runs through the snow."


def test_translate_returns_the_translation_first(server, reference):
    _, client = server
    outputs = client.predict(SENTENCE, api_name="/translate")
    assert outputs[0] == reference.translate(SENTENCE).text
    assert "translated in" in outputs[1]


def test_translate_with_beam_settings(server, reference):
    _, client = server
    outputs = client.predict(SENTENCE, "en-de", "cpu", "beam", 3, 1.0, api_name="/translate")
    assert outputs[0] == reference.translate(SENTENCE, strategy="beam", beam_size=3, length_penalty=1.0).text


def test_several_lines_are_each_translated(server, reference):
    _, client = server
    lines = ["A man sleeps.", "Two girls are dancing."]
    outputs = client.predict("\n".join(lines), api_name="/translate")
    assert outputs[0].split("\n") == [r.text for r in reference.translate_batch(lines)]


def test_details_hold_the_numbers_behind_the_plots(server, reference):
    _, client = server
    details = client.predict(SENTENCE, api_name="/translate_details")
    sentence = details["sentences"][0]
    expected = reference.translate(SENTENCE, capture=True)
    assert sentence["tgt_tokens"] == expected.tgt_tokens and sentence["src_tokens"] == expected.src_tokens
    for kind in ("encoder_self", "decoder_self", "cross"):
        np.testing.assert_allclose(np.array(sentence["attention"][kind]["weights"]), getattr(expected.attention, kind), atol=1e-5)
    assert [s["token"] for s in sentence["steps"]] == expected.tgt_tokens


@pytest.mark.parametrize("args, message", [
    (("   ",), "empty"),
    ((SENTENCE, "en-de", "cpu", "beam", 0), "Beam size must be in \\[1, 8\\]"),
    ((SENTENCE, "xx-yy"), "Model must be one of .*'en-de'.*got 'xx-yy'"),
])
def test_bad_requests_get_a_message_that_names_the_problem(server, args, message):
    _, client = server
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name="/translate")


def test_changing_the_view_never_reruns_the_model(server, monkeypatch):
    app, _ = server
    outputs = app.translate(SENTENCE, "en-de", "cpu", "greedy", 4, 0.6, 1.0, 0, 1.0, 0, 64)
    result = outputs[2]
    model = app.registry.get("en-de").translator.model
    monkeypatch.setattr(model, "forward", lambda *a, **k: pytest.fail("model ran"))
    monkeypatch.setattr(model, "decode_step", lambda *a, **k: pytest.fail("model ran"))
    for kind in ("encoder_self", "decoder_self", "cross"):
        figure = app.on_attention(result, 0, kind, "0", "1", False)
        np.testing.assert_allclose(np.asarray(figure.data[0].z, dtype=np.float32),
                                   getattr(result.translations[0].attention, kind)[0, 1], atol=1e-4)
    assert app.on_attention(result, 0, "cross", "overview", "mean", True) is not None
    markdown, *_ = app.on_step(result, 0, 2, "1", "all")
    assert "Step 2 of" in markdown


def test_cuda_without_a_gpu_falls_back_to_cpu_with_a_notice(server, monkeypatch):
    app, client = server
    monkeypatch.setattr(app.torch.cuda, "is_available", lambda: False)
    outputs = client.predict(SENTENCE, "en-de", "cuda", api_name="/translate")
    assert outputs[0]
    assert "CUDA is not available" in outputs[1] and "on CPU" in outputs[1]


def test_play_walks_through_every_step(server, monkeypatch):
    app, _ = server
    result = app.translate(SENTENCE, "en-de", "cpu", "beam", 3, 0.6, 1.0, 0, 1.0, 0, 64)[2]
    monkeypatch.setattr(app, "PLAY_DELAY_S", 0)
    frames = list(app.play(result, 0, "2", "mean"))
    steps = len(result.translations[0].steps)
    assert [frame[0] for frame in frames] == list(range(1, steps + 1))
    assert all(f"Step {i + 1} of {steps}" in frame[1] for i, frame in enumerate(frames))
    assert frames[-1][2] is not None and frames[-1][4] is not None  # the last frame draws the figures


def test_translating_keeps_the_chosen_view(server):
    app, _ = server
    outputs = app.translate(SENTENCE, kind="encoder_self", layer="0", head="1")
    figure = outputs[12]
    assert figure.layout.title.text == "Encoder self-attention: layer 1, head 2"
    assert outputs[4]["value"] == "0" and outputs[5]["value"] == "1"  # layer and head controls stay
