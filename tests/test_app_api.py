"""The app's named API endpoints through gradio_client, against a launched server."""
import base64
import json
import urllib.request
import zlib
from urllib.parse import parse_qsl

import numpy as np
import pytest
import torch
from gradio_client import Client

from explorer.request import Request
from transformer import Translator

from .app_server import running_app
from .conftest import SHIPPED, recorded

pytestmark = pytest.mark.slow

# The server computes in gradio's worker threads (or worker processes), where torch's kernels may split their sums
# otherwise than in the test's thread, and its JSON rounds to 6 decimals (transformer/decoding/export.py,
# explorer/api.py): numbers it sends agree with the local computation within float32 rounding plus 5e-7, never to
# the bit. Tokens and translations are discrete and compared exactly.


@pytest.fixture(scope="module")
def server():
    with running_app() as (app, url):
        yield app, Client(url, verbose=False)


@pytest.fixture(scope="module")
def reference():
    return Translator.from_pretrained(SHIPPED)


SENTENCE = "A dog runs through the snow."


def test_translate_returns_the_translation_and_its_summary(server, reference):
    _, client = server
    out = client.predict(SENTENCE, api_name="/translate")
    assert out["translation"] == reference.translate(SENTENCE, **recorded(reference)).text
    assert "translated in" in out["summary"] and out["translations"] == [out["translation"]]
    strategy, settings = reference.recorded_decoding()
    assert out["strategy"] == strategy and {k: out["settings"][k] for k in settings} == settings


def test_translate_with_beam_settings(server, reference):
    _, client = server
    out = client.predict(SENTENCE, model="en-de", strategy="beam", settings={"beam_size": 3, "length_penalty": 1.0},
                         api_name="/translate")
    assert out["translation"] == reference.translate(SENTENCE, strategy="beam", beam_size=3, length_penalty=1.0).text
    # the link in the answer opens this request in the page: only the chosen strategy's settings are in it
    params = dict(parse_qsl(out["link"].lstrip("?")))
    assert params["beam_size"] == "3" and params["text"] == SENTENCE and "temperature" not in params


def test_several_lines_are_each_translated(server, reference):
    _, client = server
    lines = ["A man sleeps.", "Two girls are dancing."]
    out = client.predict("\n".join(lines), api_name="/translate")
    assert out["translations"] == [r.text for r in reference.translate_batch(lines, **recorded(reference))]


def test_details_hold_the_numbers_behind_the_plots(server, reference):
    _, client = server
    details = client.predict(SENTENCE, api_name="/translate_details")
    sentence = details["sentences"][0]
    expected = reference.translate(SENTENCE, capture=True, **recorded(reference))
    assert sentence["tgt_tokens"] == expected.tgt_tokens and sentence["src_tokens"] == expected.src_tokens
    for kind in ("encoder_self", "decoder_self", "cross"):
        np.testing.assert_allclose(  # weights <= 1: float32 rounding and 6 decimals, inside 1e-5
            np.array(sentence["attention"][kind]["weights"]), getattr(expected.attention, kind), atol=1e-5
        )
    assert [s["token"] for s in sentence["steps"]] == expected.tgt_tokens
    # ALTI+: each prediction's contributions over the source and the decoder inputs (tests/test_alti.py checks them)
    alti = sentence["contributions"]
    assert alti["cols"] == expected.src_tokens + expected.decoder_input_tokens and alti["rows"] == expected.tgt_tokens
    # rows of ~20 entries, each rounded to 6 decimals (+-5e-7): their sums within 1e-5 of 1
    np.testing.assert_allclose(np.array(alti["matrix"]).sum(1), 1, atol=1e-5)
    np.testing.assert_allclose(alti["source_share"], np.array(alti["matrix"])[:, : len(expected.src_tokens)].sum(1),
                               atol=1e-5)
    # norm-based attention beside the weights: ‖f(x_key)‖ from value vectors rebuilt in tests/test_norms.py
    from .test_norms import independent_vectors

    vectors = independent_vectors(reference.model, expected.src_ids, expected.tgt_ids)
    for kind in ("encoder_self", "decoder_self", "cross"):
        norms = np.array(sentence["attention"][kind]["norms"])
        # float32 norms of order 1-10 against an independent float64 rebuild (tests/test_norms.py): 1e-4 relative;
        # the weighted norms multiply them by weights <= 1, so 1e-4 absolute
        np.testing.assert_allclose(norms, np.linalg.norm(vectors[kind], axis=-1), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(sentence["attention"][kind]["weighted_norms"],
                                   getattr(expected.attention, kind) * norms[:, :, None, :], atol=1e-4)


def unpacked(text: str, shape) -> np.ndarray:
    """A trace's bytes as the browser reads them: base64, then zlib, then one byte per value in 1/255 steps."""
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8).reshape(shape) / 255


def test_the_trace_is_what_the_page_draws_within_one_byte_of_the_full_numbers(server, reference):
    _, client = server
    lines = [SENTENCE, "Two girls are dancing."]
    trace = client.predict("\n".join(lines), api_name="/translate_trace")
    details = client.predict("\n".join(lines), api_name="/translate_details")["sentences"]
    expected = reference.translate_batch(lines, capture=True, **recorded(reference))
    assert trace["translations"] == [t.text for t in expected] and len(trace["traces"]) == 2
    for payload, sentence, translation in zip(trace["traces"], details, expected):
        assert payload["src"] == translation.src_tokens and payload["tgt"] == translation.tgt_tokens
        for kind in ("encoder_self", "decoder_self", "cross"):
            weights = getattr(translation.attention, kind)
            assert payload["kinds"][kind]["rows"] == sentence["attention"][kind]["rows"]
            # one byte per weight in 1/255 steps rounds by at most 1/510; 1e-6 more for the server's float32 rounding,
            # which may put a weight on the other side of a step's midpoint
            assert np.abs(unpacked(payload["kinds"][kind]["q"], weights.shape) - weights).max() <= 1 / 510 + 1e-6
            # norms go relative to each head's largest: the same ratios as the full-precision norms
            norms = np.array(sentence["attention"][kind]["norms"])
            relative = unpacked(payload["kinds"][kind]["norms"], norms.shape)
            np.testing.assert_allclose(relative, norms / norms.max(axis=-1, keepdims=True), atol=1 / 510 + 1e-6)
        matrix = np.array(sentence["contributions"]["matrix"])  # ALTI+ after the last layer is the full matrix
        alti = unpacked(payload["kinds"]["alti"]["q"], (-1, len(translation.tgt_tokens), matrix.shape[1]))
        assert np.abs(alti[-1] - matrix).max() <= 1 / 510 + 1e-6
        # the trace rounds source shares to 3 decimals (explorer/views/live_payload.py): 5e-4, and the details' 6
        np.testing.assert_allclose(payload["source_share"], sentence["contributions"]["source_share"], atol=1e-3)
    # the compact trace is several times smaller than the same numbers at full precision
    assert len(json.dumps(trace["traces"][0])) * 4 < len(json.dumps(details[0]))


def test_the_json_route_on_the_same_port_answers_as_the_gradio_endpoint(server):
    app, client = server
    arguments = {"text": "Two girls are dancing.\nA dog runs.", "strategy": "beam", "settings": {"beam_size": 3}}
    gradio = client.predict(arguments["text"], strategy="beam", settings={"beam_size": 3}, api_name="/translate_trace")
    request = urllib.request.Request(client.src.rstrip("/") + "/api/v1/translate", json.dumps(arguments).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        route = json.loads(answer.read())
    # one service, one cache: the same translations and traces, byte for byte, and the same link and settings
    assert route["traces"] == gradio["traces"] and route["translations"] == gradio["translations"]
    assert route["link"] == gradio["link"] and route["settings"] == gradio["settings"]
    assert app.ui.adopt(route["result_key"]).translations[1].text == gradio["translations"][1]
    with urllib.request.urlopen(client.src.rstrip("/") + "/openapi.json", timeout=60) as answer:
        assert "/api/v1/translate" in json.loads(answer.read())["paths"]


@pytest.mark.parametrize("args, message", [
    ({"text": "   "}, "empty"),
    ({"strategy": "beam", "settings": {"beam_size": 0}}, "beam_size must be in \\[1, 8\\]"),
    ({"strategy": "greedy", "settings": {"beam_size": 2}}, "unknown settings \\['beam_size'\\] for strategy 'greedy'"),
    ({"model": "xx-yy"}, "unknown model 'xx-yy'; available: .*'en-de'"),
])
def test_bad_requests_get_a_message_that_names_the_problem(server, args, message):
    _, client = server
    with pytest.raises(Exception, match=message):
        client.predict(**{"text": SENTENCE, **args}, api_name="/translate")


def test_rendering_never_runs_the_model(server, monkeypatch):
    app, _ = server
    ui = app.ui
    result = ui.translate(Request.from_api(app.registry, SENTENCE, strategy="beam"))["result"]
    model = app.registry.get("en-de").translator.model
    for method in ("forward", "encode", "decode", "decode_step"):
        monkeypatch.setattr(model, method, lambda *a, **k: pytest.fail("model ran"))
    state = ui.default_state()
    for changed in ["translation", "model", *ui.state_names]:
        assert ui.render_named(ui.views, result, state, "en-de", changed) is not None
    for kind in ("encoder_self", "decoder_self", "cross"):
        named = ui.render_named(ui.views, result, state | {"kind": kind, "layer": "0", "head": "1"}, "en-de", "kind")
        # the figure rounds to 4 decimals (explorer/figures/theme.py DECIMALS): 5e-5 and float32 rounding
        np.testing.assert_allclose(np.asarray(named["attention_plot"].data[0].z, dtype=np.float32),
                                   result.translations[0].recorded[kind].values[0, 1], atol=1e-4)
    named = ui.render_named(ui.views, result, state | {"layer": "1", "head": "all", "step": 2}, "en-de", "step")
    assert "Step 2 of" in named["step_text"]


def test_cuda_without_a_gpu_falls_back_to_cpu_with_a_notice(server, monkeypatch):
    app, client = server
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = client.predict(SENTENCE, device="cuda", api_name="/translate")
    assert out["translation"] and out["device"] == "cpu"
    assert "CUDA is not available" in out["summary"] and "on CPU" in out["summary"]


def test_play_walks_through_every_step_with_text_and_plots_in_agreement(server, monkeypatch):
    from explorer.views import steps as steps_view

    app, _ = server
    request = Request.from_api(app.registry, SENTENCE, strategy="beam", settings={"beam_size": 3})
    translation = app.ui.translate(request)["result"].translations[0]
    monkeypatch.setattr(steps_view, "PLAY_DELAY_S", 0)
    frames = list(app.ui.view("steps").play_frames(translation, "2", "mean"))
    steps = len(translation.steps)
    assert [frame["step"] for frame in frames] == list(range(1, steps + 1))
    assert all(f"Step {i + 1} of {steps}" in frame["step_text"] for i, frame in enumerate(frames))
    for frame in frames:  # every frame's figures show the step its text names
        assert frame["candidates_plot"].layout.title.text.startswith(f"Step {frame['step']}:")
        assert frame["step_source_plot"].layout.title.text.startswith(f"Step {frame['step']}:")


def test_translating_keeps_the_chosen_view(server):
    app, _ = server
    named = app.ui.translate(Request.from_api(app.registry, SENTENCE), kind="encoder_self", layer="0", head="1")
    assert named["attention_plot"].layout.title.text == "Encoder self-attention: layer 1, head 2"
    assert named["layer"]["value"] == "0" and named["head"]["value"] == "1"  # layer and head controls stay


def test_translate_and_details_take_the_same_named_arguments(server):
    _, client = server
    endpoints = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    names = [
        [p["parameter_name"] for p in endpoints[api]["parameters"]] for api in ("/translate", "/translate_details")
    ]
    expected = ["text", "model", "device", "strategy", "settings", "max_length", "prefix", "heads_off", "source_lang",
                "target_lang"]
    assert names[0] == expected and names[1] == expected  # no view state: that belongs to the page
    beam = {"text": SENTENCE, "strategy": "beam", "settings": {"beam_size": 2, "length_penalty": 1.0}, "max_length": 20}
    details = client.predict(**beam, api_name="/translate_details")
    assert client.predict(**beam, api_name="/translate")["translation"] == details["sentences"][0]["text"]


def test_a_prefix_forces_the_start_on_both_endpoints(server, reference):
    _, client = server
    expected = reference.translate(SENTENCE, prefix="Eine Katze", max_length=64, **recorded(reference))
    assert client.predict(SENTENCE, prefix="Eine Katze", api_name="/translate")["translation"] == expected.text
    details = client.predict(SENTENCE, strategy="beam", prefix="Eine Katze", api_name="/translate_details")
    sentence = details["sentences"][0]
    assert sentence["text"].startswith("Eine Katze") and details["settings"]["prefix"] == "Eine Katze"
    forced = [s["forced"] for s in sentence["steps"]]
    assert forced[:2] == [True, True] and not any(forced[2:])
    lens = sentence["logit_lens"]
    assert np.array(lens["chosen_prob"]).shape == (reference.model.config.n_layers, len(sentence["tgt_tokens"]))
    final = np.array(lens["chosen_prob"])[-1]
    # last layer = the output: the lens's teacher-forced pass against the decoder's steps (maybe our float16 kernel),
    # float32 rounding through the layers (tests/test_fused_step.py bounds it at 3e-5) and 6 decimals
    np.testing.assert_allclose(final, [s["prob"] for s in sentence["steps"]], atol=1e-4)
    with pytest.raises(Exception, match=r"prefix is \d+ pieces long; the maximum output length is 3"):
        client.predict(SENTENCE, max_length=3, prefix="Eine Katze sitzt auf dem Tisch", api_name="/translate_details")


def test_heads_off_on_the_api_is_numbered_from_one(server, reference):
    _, client = server
    config = reference.model.config
    cross = config.decoder  # the cross-attention's stack
    off = [("cross", layer, head) for layer in range(cross.layers) for head in range(cross.heads)]  # every one
    expected = reference.translate(SENTENCE, heads_off=off, max_length=64, **recorded(reference))
    text = "; ".join(f"cross {layer + 1} {head + 1}" for _, layer, head in off)
    details = client.predict(SENTENCE, heads_off=text, api_name="/translate_details")
    assert details["sentences"][0]["tgt_ids"] == expected.tgt_ids
    assert details["settings"]["heads_off"] == [list(entry) for entry in off]
    assert client.predict(SENTENCE, heads_off=text, api_name="/translate")["translation"] == expected.text
    with pytest.raises(Exception, match=rf"heads_off entry 'cross 9 1' is out of range: this model's cross "
                                        rf"layers are numbered 1-{cross.layers} and its heads 1-{cross.heads}"):
        client.predict(SENTENCE, heads_off="cross 9 1", api_name="/translate_details")
    with pytest.raises(Exception, match=r"heads_off entry 'attention 1' must be 'kind layer head'"):
        client.predict(SENTENCE, heads_off="attention 1", api_name="/translate")


def test_the_apps_default_translation_is_what_evaluate_scores(server, tmp_path, capsys):
    # the app decodes as the model card reports (metrics.json's decoding, chosen on val), so what a visitor sees
    # is what `python -m transformer.evaluate` scored; the sentences are ones where that decoding and greedy
    # decoding disagree, so an app that fell back to greedy would fail here
    from transformer import evaluate as evaluate_cli

    _, client = server
    candidates = {"en-de": ["A woman is sitting by her dried flower display at an outside market.",
                            "An Asian girl in a green hat and apron is serving drinks on a tray.",
                            "I didn't know that you were coming to the party tonight.",
                            "He asked me whether I had ever been to the mountains in winter.",
                            "Two men in orange vests are repairing the road near a bridge."],
                  "de-en": ["Ein Mann telefoniert in einem unaufgeräumten Büro",
                            "Ein junges Mädchen läuft allein durch einen Park.",
                            "Ich wusste nicht, dass du heute Abend zur Party kommst.",
                            "Er fragte mich, ob ich jemals im Winter in den Bergen gewesen sei.",
                            "Zwei Männer in orangefarbenen Westen reparieren die Straße an einer Brücke."]}
    for model, sentences in candidates.items():
        translator = Translator.from_pretrained(SHIPPED.parent / model)
        greedy = [t.text for t in translator.translate_batch(sentences)]
        tuned = [t.text for t in translator.translate_batch(sentences, **recorded(translator))]
        sentences = [s for s, g, b in zip(sentences, greedy, tuned) if g != b]
        assert sentences, f"{model}: no candidate where the recorded decoding and greedy disagree"
        src, tgt = translator.languages["src"], translator.languages["tgt"]
        (tmp_path / f"probe.{src}").write_text("\n".join(sentences) + "\n")
        (tmp_path / f"probe.{tgt}").write_text("\n".join(sentences) + "\n")  # references: unused here
        out = tmp_path / f"{model}.txt"
        evaluate_cli.main(["--checkpoint", str(SHIPPED.parent / model), "--data-dir", str(tmp_path), "--split", "probe",
                           "--out", str(out)])
        assert "beam" in capsys.readouterr().out  # evaluate decodes with the recorded beam search
        scored = out.read_text(encoding="utf-8").splitlines()
        assert scored != [t.text for t in translator.translate_batch(sentences)]  # not what greedy gives
        shown = client.predict("\n".join(sentences), model, api_name="/translate")["translations"]
        assert shown == scored


def test_why_not_explains_a_step_against_a_candidate(server, reference):
    """/why_not: the step's choice against another candidate, from the same translation the other endpoints give;
    the scores are the contrastive attribution of that step (checked by finite differences in test_contrastive)."""
    from transformer.analysis.contrastive import contrastive_input_x_gradient

    _, client = server
    expected = reference.translate(SENTENCE, **recorded(reference))
    step = 2
    foil = next(piece for piece, _ in expected.steps[step - 1].topk if piece != expected.tgt_tokens[step - 1])
    out = client.predict(SENTENCE, foil, step, api_name="/why_not")
    contrast = contrastive_input_x_gradient(reference.model, expected.src_ids, expected.tgt_ids, step - 1,
                                            reference.tokenizer.piece_to_id(foil))
    assert out["chosen"] == expected.tgt_tokens[step - 1] and out["foil"] == foil and out["step"] == step
    assert [s["token"] for s in out["source"]] == expected.src_tokens
    assert [p["token"] for p in out["prefix"]] == expected.decoder_input_tokens[:step]
    np.testing.assert_allclose([s["score"] for s in out["source"]], contrast.source, atol=1e-5)  # as /translate
    # the step's own recorded probabilities: /why_not's teacher-forced float32 pass against the decoder's step
    # (maybe our float16 kernel); a log-ratio of probabilities as small as a foil's magnifies their float32 rounding
    assert out["log_odds"] == pytest.approx(np.log(expected.steps[step - 1].prob) - np.log(
        dict(expected.steps[step - 1].topk)[foil]), abs=1e-3)
    # read through the layers: ALTI-Logit's shares (tests/test_alti_logit.py checks them by brute force) and the
    # biases add up to the same log-odds
    layers = out["alti_logit"]
    assert [s["token"] for s in layers["source"]] == expected.src_tokens
    total = sum(s["score"] for s in layers["source"] + layers["prefix"]) + layers["biases"]
    # ~20 parts rounded to 6 decimals, and ALTI-Logit's float64 over float32 activations against the float32 pass
    assert total == pytest.approx(out["log_odds"], abs=1e-4)
    with pytest.raises(Exception, match=r"step must be in \[1, \d+\]"):
        client.predict(SENTENCE, foil, 999, api_name="/why_not")
    with pytest.raises(Exception, match=r"not a piece of this model's vocabulary"):
        client.predict(SENTENCE, "no such piece", 1, api_name="/why_not")
    with pytest.raises(Exception, match=r"sentence must be in \[1, 1\]"):
        client.predict(SENTENCE, foil, 1, 2, api_name="/why_not")


def test_query_key_takes_one_weight_apart_on_the_api(server, reference):
    """/query_key, numbered from 1: its weights are the row the translation recorded, its scores the softmax's
    input (their softmax is the weights), its products sum to the scores times sqrt(head size)."""
    _, client = server
    expected = reference.translate(SENTENCE, capture=True, **recorded(reference))
    out = client.predict(SENTENCE, "decoder_self", 2, 3, 4, api_name="/query_key")
    # the server's breakdown recomputes the row from its vectors (another route, another thread): float32 rounding
    np.testing.assert_allclose(out["weights"], expected.recorded["decoder_self"].values[1, 2, 3, :4], atol=1e-4)
    scores = np.array(out["scores"])
    # scores and weights each rounded to 6 decimals: their softmax agrees within a few 1e-6
    np.testing.assert_allclose(np.exp(scores) / np.exp(scores).sum(), out["weights"], atol=1e-5)
    # a sum of head-size products each rounded to 6 decimals (+-5e-7), then float32 rounding on scores of order 1-10
    np.testing.assert_allclose(np.array(out["products"]).sum(-1) / np.sqrt(len(out["query_vector"])), scores, atol=1e-4)
    assert out["query_token"] == expected.tgt_tokens[3] and out["key_tokens"] == expected.decoder_input_tokens[:4]
    layers = reference.model.config.n_layers
    with pytest.raises(Exception, match=rf"layer must be in \[1, {layers}\], got 99 \(the API counts layer from 1\)"):
        client.predict(SENTENCE, "cross", 99, 1, 1, api_name="/query_key")
    with pytest.raises(Exception, match=r"kind must be one of"):
        client.predict(SENTENCE, "sideways", api_name="/query_key")


def test_server_status_and_a_translation_from_a_worker_process(server, monkeypatch):
    from explorer.run_pool import RunPool
    from transformer.core.half_linear import KERNEL

    app, client = server
    # the shipped models fit the kernel, so no model names a reason for the Python step
    assert client.predict(api_name="/server_status") == {"models": sorted(app.registry.models), "kernel": KERNEL.status,
                                                         "python_step": {}, "workers": 0, "workers_status": "off"}
    monkeypatch.setattr(app.ui.service.cache, "capacity", 0)  # every request below is translated
    arguments = dict(strategy="beam", settings={"beam_size": 3}, api_name="/translate_trace")
    alone = client.predict("A cat sleeps on the old sofa.", **arguments)
    pool = RunPool(app.ROOT / "checkpoints", 1)
    pool.start()
    try:
        assert pool.wait(120) == "ready", pool.status
        monkeypatch.setattr(app.ui.service, "pool", pool)
        assert client.predict(api_name="/server_status")["workers_status"] == "ready"
        from_worker = client.predict("A cat sleeps on the old sofa.", **arguments)
    finally:
        pool.close()
    assert from_worker["traces"] == alone["traces"] and from_worker["translations"] == alone["translations"]


def test_text_in_another_served_language_is_translated_as_asked_and_the_answer_says_so(server, reference):
    _, client = server
    german = "Wo ist der Bahnhof?"
    out = client.predict(german, model="en-de", api_name="/translate")
    assert out["translation"] == reference.translate(german, **recorded(reference)).text  # never switched
    offer = out["other_language"]
    assert offer["language"] == "de" and offer["model"] == "de-en" and 0.9 <= offer["probability"] <= 1
    assert any("looks German" in notice and "German → English" in notice for notice in out["notices"])
    assert client.predict(german, model="de-en", api_name="/translate")["other_language"] is None
    assert client.predict(SENTENCE, model="en-de", api_name="/translate")["other_language"] is None


PATCH_CLEAN, PATCH_CORRUPTED = "The man sits on the bank of the river.", "The man sits on the bank of the city."


def test_patch_answers_with_the_packages_restored_shares(server, reference):
    """/patch: the same shares the package computes for the same question (analysis/causal, whose cells
    tests/test_patching_analyses.py holds against hooked forward passes), counted from 1, and one cell held."""
    from transformer.analysis.causal import Question, causal_patching

    _, client = server
    clean = reference.translate(PATCH_CLEAN, **recorded(reference))
    target = clean.tgt_tokens.index("▁des") + 1
    out = client.predict(PATCH_CLEAN, PATCH_CORRUPTED, target, "▁der", "trace,heads", None, 3.0,
                         "trace residual 1 9", api_name="/patch")
    corrupted_ids = reference.tokenizer.encode(PATCH_CORRUPTED) + [reference.tokenizer.eos_id]
    want = causal_patching(reference.model, Question(clean.src_ids, corrupted_ids, clean.tgt_ids, target - 1,
                                                     reference.tokenizer.piece_to_id("▁der")), ("trace", "heads"))
    assert out["clean"]["translation"] == clean.text and out["target"] == {"piece": target, "text": "▁des"}
    assert out["corrupted"]["translation"] == reference.translate(PATCH_CORRUPTED, **recorded(reference)).text
    assert out["p_clean"] == pytest.approx(want.p_clean, abs=1e-5)
    trace = out["analyses"]["trace"][0]
    assert trace["axes"] == ["layer (from 1)", "position (from 1)"] and trace["site"] == "residual"
    # server threads may split torch's sums otherwise (see above); shares divide by p_clean - p_corrupted
    np.testing.assert_allclose(np.array(trace["restored_share"], dtype=float), want.grids[0].shares, atol=1e-3)
    assert [g["site"] for g in out["analyses"]["heads"]] == ["cross", "encoder_self", "decoder_self"]
    assert isinstance(out["held"]["translation"], str) and out["held"]["translation"]


@pytest.mark.parametrize("args, message", [
    ({"corrupted": "  "}, "corrupted: the corrupted sentence is empty"),
    ({"target": 99}, r"target must be in \[1, \d+\], got 99 for this translation \(the API counts target from 1\)"),
    ({"hold": "heads cross 9 1"}, r"layer must be in \[1, 4\], got 9"),
    ({"hold": "heads cross 1 7"}, r"head must be in \[1, 4\], got 7"),
    ({"corrupted": "", "noise_word": 2, "noise_std": "NaN"}, "noise_std must be .*got 'NaN'"),
    ({"corrupted": "x" * 5000}, "^corrupted has 5,000 characters; the limit is 2,000"),
    # each text named by its own argument, not the page's "Source text"
    ({"clean": ""}, "^clean is empty"),
    ({"clean": "x" * 10_000}, "^clean has 10,000 characters; the limit is 2,000"),
    ({"corrupted": "x" * 10_000}, "^corrupted has 10,000 characters; the limit is 2,000"),
    ({"contrast": ["Katze"]}, "^contrast must be a piece of the model's vocabulary, as text, or null; got list"),
    ({"hold": ["trace", "residual", 1, 1]}, "^hold must be one cell as text"),
    ({"corrupted": 7}, "^corrupted must be a sentence as text"),
    ({"analyses": "trace,everything"}, "analyses: 'everything'; choose some of trace, heads, path, attribution"),
])
def test_patch_refuses_bad_input_with_one_message_naming_it(server, args, message):
    _, client = server
    with pytest.raises(Exception, match=message):
        client.predict(**{"clean": PATCH_CLEAN, "corrupted": PATCH_CORRUPTED, "target": 2, "analyses": "trace",
                          **args}, api_name="/patch")


@pytest.mark.parametrize("name", ["clean", "corrupted"])
def test_patch_names_the_text_that_holds_a_lone_surrogate(server, name):
    """Called in the server's process: JSON clients (gradio_client among them) refuse to send a lone surrogate."""
    import gradio as gr

    from explorer.patch_api import patch_endpoint

    app, _ = server
    texts = {"clean": PATCH_CLEAN, "corrupted": PATCH_CORRUPTED, name: "A dog \ud800 runs."}
    with pytest.raises(gr.Error) as caught:
        patch_endpoint(app.ui)(**texts, target=2, analyses="trace")
    assert caught.value.message.startswith(f"{name} is not valid Unicode text: character 7 is a lone surrogate")


def test_patch_keeps_markup_as_text(server):
    _, client = server
    out = client.predict(clean="<b>The dog</b> runs.", corrupted="<i>The cat</i> runs.", target=1,
                         analyses="heads", api_name="/patch")
    assert out["clean"]["text"] == "<b>The dog</b> runs." and out["corrupted"]["text"] == "<i>The cat</i> runs."
