"""docs/architecture.md's recipes "A checkpoint or a language pair" and "A converted model", followed step by step
in a folder of their own: a new pair's checkpoint written as the recipe lists its files, its language's name, example
sentences and probe sentences added where the recipe says, and a Hugging Face Marian model converted by the recipe's
command; each then served as the app serves its checkpoints folder. (tests/test_plugins.py follows the view, strategy
and analysis recipes.)"""
from __future__ import annotations

import html
import json
import shutil
import subprocess
import sys
import warnings

import pytest
import sentencepiece as spm
import torch
from safetensors.torch import save_file

import explorer.text
from explorer.registry import DEFAULT_MODEL_SETTING, LANGUAGE_NAMES, discover
from explorer.request import Request
from explorer.shell import build_demo
from transformer import Tokenizer, Transformer, Translator
from transformer.checkpoint import CheckpointError
from transformer.training import timeline as timelines
from transformer.training.timeline import Timeline

from .conftest import ROOT, tiny_config

ITALIAN_EXAMPLES = ["Un cane corre nella neve.", "Due bambini giocano con una palla rossa."]
ITALIAN_PROBES = ["Ho lasciato l'ombrello alla stazione.", "Un uomo anziano dà da mangiare ai piccioni."]


def write_checkpoint(folder, tokenizer_file, src: str, tgt: str, seed: int = 0):
    """The recipe's folder, file by file: config.json (the ModelConfig, languages, the tokenizer's settings),
    model.safetensors and spm.model; a random tiny model, as a trained one is laid out."""
    torch.manual_seed(seed)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab))
    folder.mkdir(parents=True)
    config = {"model": model.config.to_dict(), "languages": {"src": src, "tgt": tgt},
              "tokenizer": {"type": "sentencepiece", "file": "spm.model", "vocab_size": vocab}}
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    save_file({name: tensor.contiguous() for name, tensor in model.state_dict().items()},
              str(folder / "model.safetensors"))
    shutil.copy(tokenizer_file, folder / "spm.model")
    return folder


@pytest.fixture
def checkpoints(tmp_path, tokenizer_file, monkeypatch):
    """A checkpoints folder: en-it (first in folder order, from the page's language), it-en (the new pair) and a
    folder whose weights are missing."""
    monkeypatch.delenv(DEFAULT_MODEL_SETTING, raising=False)
    root = tmp_path / "checkpoints"
    write_checkpoint(root / "en-it", tokenizer_file, "en", "it", seed=1)
    write_checkpoint(root / "it-en", tokenizer_file, "it", "en", seed=2)
    (write_checkpoint(root / "no-weights", tokenizer_file, "it", "en") / "model.safetensors").unlink()
    return root


def test_a_new_language_pair_is_served_by_folder_and_labelled_by_its_language_name(checkpoints, monkeypatch):
    monkeypatch.delitem(LANGUAGE_NAMES, "it", raising=False)  # a language new here: without its name, its code
    assert discover(checkpoints).get("it-en").label == "it → English (it-en)"
    monkeypatch.setitem(LANGUAGE_NAMES, "it", "Italian")  # the recipe's step: its name in LANGUAGE_NAMES
    registry = discover(checkpoints)
    assert registry.choices == [("English → Italian (en-it)", "en-it"), ("Italian → English (it-en)", "it-en")]
    # the folder that fails to load is skipped and named, on the page too
    assert list(registry.problems) == ["no-weights"] and "model.safetensors" in registry.problems["no-weights"]
    demo, _ = build_demo(registry)
    shown = [html.unescape(block.value) for block in demo.blocks.values()
             if getattr(block, "elem_id", None) == "problems"]  # Markdown with every sign as an entity
    assert len(shown) == 1 and "**no-weights**: " in shown[0] and "model.safetensors: file is missing" in shown[0]
    # what the folder holds is what translates: the served model against one loaded from its files alone
    served = registry.get("it-en").translator.translate("a dog runs .", strategy="greedy", max_length=8)
    assert served.tgt_ids == Translator.from_pretrained(checkpoints / "it-en").translate(
        "a dog runs .", strategy="greedy", max_length=8).tgt_ids
    # installed, a folder under the package's checkpoints is found by its name from any directory
    monkeypatch.setattr("transformer.checkpoint.SHIPPED_ROOT", checkpoints)
    monkeypatch.chdir(checkpoints.parent.parent)
    assert Translator.from_pretrained("it-en").languages == {"src": "it", "tgt": "en"}
    with pytest.raises(CheckpointError, match="fr-it"):
        Translator.from_pretrained("fr-it")


def test_the_default_model_setting_picks_the_new_pair_and_refuses_a_name_not_served(checkpoints, monkeypatch):
    assert discover(checkpoints).default_key == "en-it"  # unset: the first served model from English
    monkeypatch.setenv(DEFAULT_MODEL_SETTING, "it-en")
    registry = discover(checkpoints)
    assert registry.default_key == "it-en" and Request.from_api(registry, "Un cane.").model == "it-en"
    monkeypatch.setenv(DEFAULT_MODEL_SETTING, "no-weights")  # a folder that is there but did not load is not served
    with pytest.raises(ValueError, match=rf"{DEFAULT_MODEL_SETTING} must be one of the served models "
                                         r"\['en-it', 'it-en'\], got 'no-weights'"):
        discover(checkpoints)


def test_the_new_pairs_examples_and_probe_sentences_reach_the_page(checkpoints, monkeypatch, tmp_path):
    """Examples in explorer/static/examples.<src>.txt (a copy of that folder here, so the repository's stays as it
    is) and probe sentences in PROBE_SENTENCES; without them the English ones stand in."""
    static = tmp_path / "static"
    static.mkdir()
    shutil.copy(explorer.text.STATIC / "examples.en.txt", static)
    english = [line for line in (static / "examples.en.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    monkeypatch.setattr(explorer.text, "STATIC", static)
    assert explorer.text.examples_for("it") == english
    assert Timeline.for_language("it").sentences == timelines.PROBE_SENTENCES["en"]
    (static / "examples.it.txt").write_text("\n".join(ITALIAN_EXAMPLES) + "\n", encoding="utf-8")
    monkeypatch.setitem(timelines.PROBE_SENTENCES, "it", ITALIAN_PROBES)
    # what `python -m transformer.train` records for the Training view, for the pair's source language
    translator = Translator.from_pretrained(checkpoints / "it-en")
    timeline = Timeline.for_language(translator.languages["src"])
    timeline.record(translator, 1, train_loss=5.0, val_bleu=0.0)
    timeline.save(checkpoints / "it-en")
    monkeypatch.setenv(DEFAULT_MODEL_SETTING, "it-en")
    _, ui = build_demo(discover(checkpoints))
    example = ui.components["example"]
    assert [value for _, value in example.choices] == ITALIAN_EXAMPLES
    assert ITALIAN_EXAMPLES[0] in ui.components["source"].placeholder
    probes = [label for label, _ in ui.components["timeline_sentence"].choices]
    assert [label.split(": ", 1)[1] for label in probes] == ITALIAN_PROBES
    # the recorded source pieces are the probe sentences' own, cut by the checkpoint's spm.model
    processor = spm.SentencePieceProcessor(model_file=str(checkpoints / "it-en" / "spm.model"))
    assert [output["src"] for output in timeline.epochs[0]["outputs"]] == [
        processor.encode(sentence, out_type=str) + ["</s>"] for sentence in ITALIAN_PROBES]


# ---- A converted model: the recipe's command, then the folder served like any other


def test_a_converted_model_is_served_from_the_checkpoints_folder_and_decodes_as_hugging_face(tmp_path):
    transformers = pytest.importorskip("transformers")
    from .marian_fixtures import opus_generation_config, write_hf_marian, write_tokenizer_files

    hf_folder = write_hf_marian(tmp_path / "hf", write_tokenizer_files(tmp_path / "spm"), logits_bias=True)
    out = tmp_path / "checkpoints" / "opus-tiny"
    command = [sys.executable, "-m", "transformer.convert_marian", str(hf_folder), str(out)]
    converted = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    assert converted.returncode == 0, converted.stderr
    registry = discover(tmp_path / "checkpoints")
    assert registry.choices == [("English → German (opus-tiny)", "opus-tiny")] and registry.default_key == "opus-tiny"
    _, ui = build_demo(registry)
    hf_model = transformers.MarianMTModel.from_pretrained(hf_folder).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses."
        hf_tokenizer = transformers.MarianTokenizer.from_pretrained(hf_folder)
    limit = 10
    pad = hf_tokenizer.pad_token_id
    generation = transformers.GenerationConfig(**opus_generation_config(pad, max_length=limit + 2) | {"num_beams": 1})
    lengths = []
    for text in ("the cat runs over the big house.", "two girl plays near water"):
        named = ui.translate(Request.from_api(ui.registry, text, strategy="greedy", max_length=limit))
        with torch.no_grad():
            expected = hf_model.generate(**hf_tokenizer([text], return_tensors="pt"), generation_config=generation)[0]
        # OPUS-MT's forced_eos_token_id puts </s> at the length limit, where ours stops: the first `limit` ids
        assert named["result"].translations[0].tgt_ids == expected[1: limit + 1].tolist(), text
        lengths.append(len(expected) - 1)
        assert named["translation"] == hf_tokenizer.decode(expected[1: limit + 1], skip_special_tokens=True)
    assert max(lengths) > 2, lengths  # more than a lone </s>: the steps after the first are compared too
