"""Bad input, out-of-range settings, faults, untrusted files, determinism and many users at once."""
import json
import shutil
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from gradio_client import Client

from explorer.exports import EXPORT_MAX_AGE_S, export_files
from explorer.registry import NoUsableCheckpoint, discover
from explorer.request import MAX_CHARACTERS, MAX_LINES, Request, RequestError

from .app_server import running_app
from .conftest import ROOT, SHIPPED, recorded

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with running_app() as (app, url):
        yield app, url, Client(url, verbose=False)


EXOTIC = [
    "A man 🚴‍♂️ rides a bike 🚲.",
    "一个男人在骑自行车。",
    "رجل يركب دراجة",
    "איש רוכב על אופניים",
    "Cafe\u0301 s\u0308ign with combining marks",
    "zero\u200bwidth\u200djoiner\ufeff text",
    "control\x00\x07\x1b chars\ttab",
    "<script>alert(1)</script> <b>bold</b> & <img src=x onerror=alert(1)>",
]


@pytest.mark.parametrize("text", EXOTIC)
def test_exotic_input_translates_without_breaking(server, text):
    _, _, client = server
    details = client.predict(text, api_name="/translate_details")
    sentence = details["sentences"][0]
    assert len(sentence["tgt_tokens"]) >= 1 and sentence["attention"]["cross"]["shape"][3] == len(
        sentence["src_tokens"]
    )


def test_html_stays_text_in_summary_steps_and_export(server):
    app, _, _ = server
    source = "<b>A dog</b> <img src=x onerror=alert(1)>"
    named = app.ui.translate(Request.from_api(app.registry, source, strategy="greedy"))
    step_markdown = named["step_text"]
    assert "<img" not in step_markdown and "<b>" not in step_markdown
    with open(export_files(named["result"], app.registry)[0], encoding="utf-8") as exported:
        assert json.load(exported)["sentences"][0]["source"] == source  # data, kept exactly


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("   \n\t ", "empty"),
    ("word " * (MAX_CHARACTERS // 5 + 10), f"limit is {MAX_CHARACTERS:,}"),
    ("x" * 10_500, "10,500 characters"),
    ("\n".join(["A dog."] * (MAX_LINES + 1)), f"limit is {MAX_LINES} sentences"),
])
def test_bad_text_gets_a_clear_message(server, text, message):
    _, _, client = server
    with pytest.raises(Exception, match=message):
        client.predict(text, api_name="/translate")


def test_text_longer_than_the_model_is_cut_and_says_so(server):
    _, _, client = server
    long_line = " ".join(["a red ball"] * 60)  # ~180 pieces, above the model's 127 source positions
    out = client.predict(long_line, api_name="/translate")
    assert out["translation"] and "only the first part was translated" in out["summary"]


SENTENCE = "A dog runs."


@pytest.mark.parametrize("settings, message", [
    ({"strategy": "beam", "settings": {"beam_size": 0}}, r"beam_size must be in \[1, 8\]"),
    ({"strategy": "beam", "settings": {"beam_size": 2.5}}, r"beam_size must be an integer in \[1, 8\]"),
    ({"strategy": "sample", "settings": {"temperature": 0}}, r"temperature must be in \[0.05, 5.0\]"),
    ({"strategy": "sample", "settings": {"temperature": -1}}, r"temperature"),
    ({"strategy": "sample", "settings": {"top_p": 1.5}}, r"top_p must be in \[0.05, 1.0\]"),
    ({"strategy": "sample", "settings": {"seed": -1}}, r"seed must be in \[0, 2147483647\]"),
    ({"strategy": "sample", "settings": {"seed": "7"}}, r"seed must be an integer"),
    ({"settings": "beam_size=4"}, r"settings must be a dict"),
    ({"max_length": 0}, r"max_length must be in \[1, 128\]"),
    ({"max_length": 10**9}, r"max_length must be in \[1, 128\]"),
    ({"model": "../../etc"}, r"unknown model"),
    ({"device": "tpu"}, r"device must be 'cpu' or 'cuda'"),
    ({"strategy": "telepathy"}, r"strategy must be one of"),
])
def test_out_of_range_settings_name_the_setting(server, settings, message):
    _, _, client = server
    with pytest.raises(Exception, match=message):
        client.predict(SENTENCE, **settings, api_name="/translate_details")


@pytest.mark.parametrize("name, value, field", [
    ("beam.beam_size", 9, "beam.beam_size"), ("sample.temperature", 0, "sample.temperature"),
    ("max_length", 10**9, "max_length"), ("device", "tpu", "device"), ("source", " ", "source"),
])
def test_the_pages_controls_are_checked_and_a_bad_one_is_named(server, name, value, field):
    """The page's Translate builds its request from the controls by name: a bad one is refused and named (the
    page puts the message on that control)."""
    app, _, _ = server
    ui = app.ui
    values = {**{n: ui.components[n].value for n in ui.request_names}, "source": SENTENCE, name: value}
    values["strategy"] = name.split(".")[0] if "." in name else values["strategy"]
    with pytest.raises(RequestError) as caught:
        Request.from_page(app.registry, values)
    assert ("source" if caught.value.field == "text" else caught.value.field) == field


def test_a_failure_inside_the_model_reaches_only_that_visitor(server, monkeypatch):
    app, _, client = server
    translator = app.registry.get("en-de").translator
    original = translator.translate_batch
    calls = {"n": 0}

    def fail_once(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated fault inside the model")
        return original(*args, **kwargs)

    monkeypatch.setattr(translator, "translate_batch", fail_once)
    with pytest.raises(Exception, match="Translation failed: RuntimeError"):
        client.predict(SENTENCE, api_name="/translate")
    assert client.predict(SENTENCE, api_name="/translate")["translation"]  # the server keeps serving


def test_sampling_is_deterministic_for_a_seed(server):
    _, _, client = server
    sampled = {"strategy": "sample", "settings": {"temperature": 1.5, "seed": 42}}
    first = client.predict(SENTENCE, **sampled, api_name="/translate_details")
    again = client.predict(SENTENCE, **sampled, api_name="/translate_details")
    assert details_fingerprint(first) == details_fingerprint(again)


def test_server_serves_no_files_beyond_the_ui(server):
    app, url, _ = server
    for path in (ROOT / "app.py", SHIPPED / "model.safetensors", "/etc/passwd"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}gradio_api/file={path}", timeout=10)
        assert refused.value.code in (403, 404)


def copy_checkpoint(destination):
    shutil.copytree(SHIPPED, destination)
    return destination


def test_bad_checkpoints_are_skipped_and_named(tmp_path):
    copy_checkpoint(tmp_path / "en-de")
    (copy_checkpoint(tmp_path / "missing") / "model.safetensors").unlink()
    corrupted = copy_checkpoint(tmp_path / "corrupted") / "model.safetensors"
    corrupted.write_bytes(corrupted.read_bytes()[:1000])
    mismatched = copy_checkpoint(tmp_path / "mismatched") / "config.json"
    config = json.loads(mismatched.read_text())
    config["model"]["d_model"] *= 2
    mismatched.write_text(json.dumps(config))
    registry = discover(tmp_path)
    assert list(registry.models) == ["en-de"]
    assert "missing" in registry.problems["missing"] and "model.safetensors" in registry.problems["missing"]
    assert "truncated" in registry.problems["corrupted"]
    assert "shape" in registry.problems["mismatched"]


def test_no_usable_checkpoint_says_how_to_fix_it(tmp_path):
    (copy_checkpoint(tmp_path / "broken") / "spm.model").unlink()
    with pytest.raises(NoUsableCheckpoint, match="git checkout -- checkpoints/.*transformer.train"):
        discover(tmp_path)
    with pytest.raises(NoUsableCheckpoint, match="no folder with a config.json"):
        discover(tmp_path / "empty")


def details_fingerprint(details: dict) -> str:
    """The translation and every number behind the plots, as one comparable string."""
    return json.dumps([(s["text"], s["tgt_ids"], s["attention"]) for s in details["sentences"]], sort_keys=True)


def test_simultaneous_clients_get_what_they_get_alone(server):
    _, url, _ = server
    requests = [(sentence, settings) for sentence in ("A man sleeps.", "Two dogs play in the snow.", "A chef cooks.")
                for settings in ({"strategy": "greedy"}, {"strategy": "beam", "settings": {"beam_size": 3}},
                                 {"strategy": "sample", "settings": {"temperature": 0.8, "seed": 5}})]
    clients = [Client(url, verbose=False) for _ in range(4)]
    alone = [details_fingerprint(clients[0].predict(text, **settings, api_name="/translate_details"))
             for text, settings in requests]
    together = [None] * len(requests) * 2

    def send(index):
        text, settings = requests[index % len(requests)]
        together[index] = details_fingerprint(
            clients[index % 4].predict(text, **settings, api_name="/translate_details")
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(send, range(len(together))))
    assert together == alone + alone


def test_old_exports_are_removed(server, monkeypatch):
    import os
    import time

    app, _, _ = server
    result = app.ui.translate(Request.from_api(app.registry, SENTENCE))["result"]
    first = export_files(result, app.registry)
    old_folder = os.path.dirname(first[0])
    past = time.time() - EXPORT_MAX_AGE_S - 10
    os.utime(old_folder, (past, past))
    second = export_files(result, app.registry)
    assert not os.path.exists(old_folder) and all(os.path.exists(path) for path in second)


def test_cuda_out_of_memory_falls_back_to_cpu_with_a_notice(server, monkeypatch):
    app, _, _ = server
    served = app.registry.get("en-de")

    class OutOfMemoryOnCuda:  # stands in for the CUDA copy of the model, which this machine cannot hold
        def translate_batch(self, *args, **kwargs):
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    monkeypatch.setattr(
        type(served),
        "on",
        lambda self, device: (OutOfMemoryOnCuda(), None) if device == "cuda" else (self.translator, None),
    )
    named = app.ui.translate(Request.from_api(app.registry, SENTENCE, device="cuda"))
    assert named["translation"] == served.translator.translate(SENTENCE, **recorded(served.translator)).text
    assert "CUDA ran out of memory" in named["summary"] and "on CPU" in named["summary"]
