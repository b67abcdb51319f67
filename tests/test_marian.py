"""Marian (OPUS-MT) models converted into our Transformer compute what Hugging Face's own code computes.

A tiny random MarianMTModel is built here from a MarianConfig, saved with save_pretrained beside SentencePiece models
trained here, converted by transformer.convert_marian, and compared with transformers on the same inputs: logits,
greedy output, tokenizer ids and text, and every recorded attention probability."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.marian_fixtures import ENGLISH, GERMAN, sentences, write_hf_marian, write_tokenizer_files  # noqa: E402
from transformer import Translator  # noqa: E402
from transformer.convert_marian import ConversionError, convert, main  # noqa: E402
from transformer.core.capture import capture_attention  # noqa: E402
from transformer.core.fused_step import why_not_fused  # noqa: E402

# a distilled OPUS-MT student's shape in miniature: each stack its own layers, heads and feed-forward width
UNEQUAL_STACKS = dict(activation="swish", share=True, tie=True, logits_bias=True, encoder_layers=4, decoder_layers=2,
                      encoder_attention_heads=4, decoder_attention_heads=2, encoder_ffn_dim=96, decoder_ffn_dim=48)
VARIANTS = {  # activation, one matrix for both embeddings, output tied to it, nonzero final_logits_bias
    "swish-tied-zero-bias": dict(activation="swish", share=True, tie=True, logits_bias=False),
    "swish-tied-bias": dict(activation="swish", share=True, tie=True, logits_bias=True),
    "relu-untied-bias": dict(activation="relu", share=False, tie=False, logits_bias=True),
    "relu-separate-tied-zero-bias": dict(activation="relu", share=False, tie=True, logits_bias=False),
    "deep-encoder-shallow-decoder": UNEQUAL_STACKS,
}
SOURCES = sentences(ENGLISH, 6, seed=7) + ["Zebra ünd Ωmega € 😀!", "the cat, the dog; and... the tree?!"]


def fifty_sentences() -> list[str]:
    """Both languages, punctuation, characters neither model has seen, a language code, spacing oddities."""
    odd = ["Zebra ünd Ωmega € 😀!", "  the   cat  ", "", "«der Hund» — ist groß…", "tab\tand\nnewline",
           "ＡＢＣ full-width", "e\u0301 combining", ">>de<< the cat runs", "the </s> end", "x<unk>y <pad>",
           "100% (sure) [maybe] {no} #1 @home", "Ünïcödé ßtraße", "日本語のテキスト", "the cat's toy isn't here",
           "what?!? yes!!! no...", "a-b_c/d\\e", "   ", "dog.cat,tree", "\"quoted\" 'single'", "tail space "]
    return odd + sentences(ENGLISH, 15, seed=3) + sentences(GERMAN, 15, seed=4)


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return write_tokenizer_files(tmp_path_factory.mktemp("marian-spm"))


@pytest.fixture(scope="module", params=list(VARIANTS))
def pair(request, tokenizer_dir, tmp_path_factory):
    """(Hugging Face model, its tokenizer, our Translator of the converted folder) for one variant."""
    root = tmp_path_factory.mktemp(request.param)
    hf_folder = write_hf_marian(root / "hf", tokenizer_dir, **VARIANTS[request.param])
    out = convert(str(hf_folder), root / "converted")
    hf_model = transformers.MarianMTModel.from_pretrained(hf_folder, attn_implementation="eager").eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Recommended: pip install sacremoses."
        hf_tokenizer = transformers.MarianTokenizer.from_pretrained(hf_folder)
    return hf_model, hf_tokenizer, Translator.from_pretrained(out)


def batch(hf_tokenizer, sources: list[str], targets: list[str]):
    inputs = hf_tokenizer(sources, text_target=targets, return_tensors="pt", padding=True)
    labels = inputs.pop("labels")
    start = torch.full((labels.size(0), 1), hf_tokenizer.pad_token_id)
    return inputs, torch.cat([start, labels[:, :-1]], dim=1), labels


def test_teacher_forced_logits_equal_hugging_face(pair):
    hf_model, hf_tokenizer, ours = pair
    targets = sentences(GERMAN, len(SOURCES), seed=9)
    inputs, decoder_input, labels = batch(hf_tokenizer, SOURCES, targets)
    with torch.no_grad():
        expected = hf_model(**inputs, decoder_input_ids=decoder_input).logits
        actual = ours.model(inputs["input_ids"], decoder_input)
    real = labels != hf_tokenizer.pad_token_id  # padded target positions hold no prediction
    assert real.sum() > 0 and (inputs["attention_mask"] == 0).any()  # padding in the batch is exercised
    # our model against Hugging Face's, the same weights by other ops: float32 rounding on logits of order 10
    torch.testing.assert_close(actual[real], expected[real], atol=1e-4, rtol=0)


def test_greedy_ids_equal_generate(pair, tmp_path):
    hf_model, hf_tokenizer, ours = pair
    limit = 12
    generation = transformers.GenerationConfig.from_pretrained(ours.source.parent / "hf")
    assert generation.bad_words_ids == [[hf_tokenizer.pad_token_id]]  # the pad token is never generated
    # greedy with OPUS-MT's rules; its forced_eos_token_id puts </s> at the length limit, where ours just stops, so
    # it gets one more position (the start token counts in max_length) and the first `limit` tokens are compared
    generation.update(num_beams=1, max_length=limit + 2)
    for text in SOURCES:
        with torch.no_grad():
            expected = hf_model.generate(**hf_tokenizer([text], return_tensors="pt"), generation_config=generation)[0]
        translation = ours.translate(text, strategy="greedy", max_length=limit)
        expected = expected[1: limit + 1]  # after the decoder start token
        assert translation.tgt_ids == expected.tolist(), text
        assert translation.text == hf_tokenizer.decode(expected, skip_special_tokens=True, use_source_tokenizer=False)
    beam = ours.translate(SOURCES[0], strategy="beam", beam_size=2, max_length=limit)
    assert ours.model.config.pad_id not in beam.tgt_ids


def test_recorded_attention_equals_output_attentions(pair):
    """Every kind, layer and head: our probes during a teacher-forced pass, and while decoding step by step."""
    hf_model, hf_tokenizer, ours = pair
    targets = sentences(GERMAN, 3, seed=11)
    inputs, decoder_input, labels = batch(hf_tokenizer, SOURCES[:3], targets)
    with torch.no_grad():
        expected = hf_model(**inputs, decoder_input_ids=decoder_input, output_attentions=True)
        with capture_attention(ours.model) as recorded:
            ours.model(inputs["input_ids"], decoder_input)
    # compared on the rows of real positions: a padded query row predicts nothing (Hugging Face, given no decoder
    # mask, lets padded target positions see each other; ours masks padding as a key everywhere)
    real_rows = {"encoder_self": inputs["attention_mask"].bool(), "decoder_self": labels != hf_tokenizer.pad_token_id}
    real_rows["cross"] = real_rows["decoder_self"]
    for kind, theirs in (("encoder_self", expected.encoder_attentions), ("decoder_self", expected.decoder_attentions),
                         ("cross", expected.cross_attentions)):
        theirs = torch.stack(theirs)  # (L, B, H, queries, keys)
        assert recorded[kind].shape == theirs.shape
        rows = real_rows[kind][None, :, None, :].expand(theirs.shape[:-1])
        torch.testing.assert_close(recorded[kind][rows], theirs[rows], atol=1e-5, rtol=0)  # float32, weights <= 1

    translation = ours.translate(SOURCES[0], strategy="greedy", max_length=8, capture=True)
    src = torch.tensor([translation.src_ids])
    start = [ours.model.config.decoder_start_id]
    with torch.no_grad():
        expected = hf_model(input_ids=src, decoder_input_ids=torch.tensor([start + translation.tgt_ids[:-1]]),
                            output_attentions=True)
    for kind, theirs in (("encoder_self", expected.encoder_attentions), ("decoder_self", expected.decoder_attentions),
                         ("cross", expected.cross_attentions)):
        values = torch.from_numpy(translation.recorded[kind].values)  # (L, H, rows, cols)
        torch.testing.assert_close(values, torch.stack(theirs)[:, 0], atol=1e-5, rtol=0)  # as above, step by step


def test_tokenizer_equals_marian_tokenizer(pair):
    _, hf_tokenizer, ours = pair
    texts = fifty_sentences()
    assert len(texts) == 50
    for text in texts:
        source = hf_tokenizer(text)["input_ids"]
        assert ours.source_ids(text)[0] == source, text
        target = hf_tokenizer(text_target=text)["input_ids"]
        assert ours.tokenizer.encode_target(text) + [ours.tokenizer.eos_id] == target, text
        for ids in (source, target):
            assert ours.tokenizer.decode(ids) == hf_tokenizer.decode(ids, skip_special_tokens=True,
                                                                     use_source_tokenizer=False), text
            assert [ours.tokenizer.id_to_piece(i) for i in ids] == hf_tokenizer.convert_ids_to_tokens(ids)
    assert any(ours.tokenizer.unk_id in hf_tokenizer(t)["input_ids"] for t in texts)  # unknown characters covered


def test_converted_folder_is_a_checkpoint(pair, tmp_path):
    _, hf_tokenizer, ours = pair
    config = ours.model.config
    assert (config.norm, config.final_norm, config.sinusoidal_layout) == ("post", False, "halves")
    assert ours.languages == {"src": "en", "tgt": "de"}
    assert ours.recorded_decoding() == ("beam", {"beam_size": 4, "length_penalty": 1.0})
    assert why_not_fused(ours.model, 1).startswith("the kernel runs pre-norm layers")
    assert "cc-by-4.0" in (ours.source / "README.md").read_text()
    copy = ours.save_pretrained(tmp_path / "copy")
    again = Translator.from_pretrained(copy)
    greedy = {"strategy": "greedy"}
    assert again.translate(SOURCES[1], **greedy).tgt_ids == ours.translate(SOURCES[1], **greedy).tgt_ids


def test_the_package_never_imports_transformers():
    code = ("import sys, transformer, transformer.decoding, transformer.checkpoint, transformer.marian_tokenizer, "
            "explorer.registry; print('transformers' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# ---- what the converter refuses: one line naming it, exit status 2, nothing written at OUT


@pytest.fixture(scope="module")
def good_hf(tokenizer_dir, tmp_path_factory):
    return write_hf_marian(tmp_path_factory.mktemp("good") / "hf", tokenizer_dir)


def broken_copy(good_hf, tmp_path, change) -> str:
    folder = tmp_path / "hf"
    shutil.copytree(good_hf, folder)
    change(folder)
    return str(folder)


def edit_config(**values):
    def change(folder):
        config = json.loads((folder / "config.json").read_text())
        config.update(values)
        (folder / "config.json").write_text(json.dumps(config))
    return change


def corrupt_weights(folder):
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 3])


@pytest.mark.parametrize("change, message", [
    (edit_config(model_type="bart", architectures=["BartForConditionalGeneration"]), "only Marian models"),
    (lambda folder: (folder / "vocab.json").unlink(), "vocab.json: file is missing"),
    (corrupt_weights, "model.safetensors: cannot be read"),
    (edit_config(activation_function="gelu_new"), "unsupported activation_function 'gelu_new'"),
    (edit_config(normalize_before=True), "unsupported normalize_before=true"),
    (edit_config(add_final_layer_norm=True), "unsupported add_final_layer_norm=true"),
    (edit_config(some_new_flag=1), "unsupported config key 'some_new_flag'"),
], ids=["not-marian", "no-vocab", "corrupt-weights", "activation", "normalize-before", "final-norm", "unknown-key"])
def test_converter_refuses(good_hf, tmp_path, change, message, capsys):
    source = broken_copy(good_hf, tmp_path, change)
    out = tmp_path / "out" / "converted"
    with pytest.raises(ConversionError, match=message.replace("(", r"\(")):
        convert(source, out)
    assert not out.exists() and list((tmp_path / "out").iterdir()) == []  # nothing half-written, no temp folder left
    with pytest.raises(SystemExit) as stopped:
        main([source, str(out)])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.strip().count("\n") == 0 and message in error
    assert not out.exists()


@pytest.mark.parametrize("where", ["parent is a file", "folder not writable"])
def test_converter_says_in_one_line_when_out_cannot_be_written(good_hf, tmp_path, where, capsys):
    """OUT under a file, or in a folder nobody may write (sysfs refuses even root, as a read-only mount would):
    one line naming the path, status 2, and nothing left behind."""
    if where == "parent is a file":
        (tmp_path / "file").write_text("taken")
        out = tmp_path / "file" / "converted"
    else:
        out = Path("/sys") / "converted"
        if os.access("/sys", os.W_OK) and not Path("/sys/kernel").is_dir():
            pytest.skip("no read-only sysfs here")
    with pytest.raises(SystemExit) as stopped:
        main([str(good_hf), str(out)])
    error = capsys.readouterr().err
    assert stopped.value.code == 2 and error.strip().count("\n") == 0 and "Traceback" not in error
    assert str(out.parent) in error and not out.exists()


def test_converter_command_line(tmp_path, good_hf):
    """The real command: one line and status 2 for a bad SRC or an OUT that exists, no traceback; then it converts."""
    command = [sys.executable, "-m", "transformer.convert_marian"]
    result = subprocess.run([*command, str(tmp_path / "nowhere"), str(tmp_path / "out")], capture_output=True,
                            text=True)
    assert result.returncode == 2 and "no such folder" in result.stderr and "Traceback" not in result.stderr
    (tmp_path / "taken").mkdir()
    result = subprocess.run([*command, str(good_hf), str(tmp_path / "taken")], capture_output=True, text=True)
    assert result.returncode == 2 and "already exists" in result.stderr and result.stderr.count("\n") == 1
    result = subprocess.run([*command, str(good_hf), str(tmp_path / "new"), "--target-lang", "de-AT"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert Translator.from_pretrained(tmp_path / "new").languages == {"src": "en", "tgt": "de-AT"}


def test_hub_setting_serves_cached_conversions_and_names_bad_values(good_hf, tmp_path, monkeypatch):
    from explorer.hub_models import SWITCH, converted_folders, hub_models_from_environment
    from explorer.registry import discover

    monkeypatch.setenv(SWITCH, "Helsinki-NLP/opus-mt-en-de, local/tiny")
    assert hub_models_from_environment() == ["Helsinki-NLP/opus-mt-en-de", "local/tiny"]
    monkeypatch.setenv(SWITCH, "opus-mt-en-de")
    with pytest.raises(ValueError, match=f"{SWITCH} must be comma-separated Hub model names.*'opus-mt-en-de'"):
        hub_models_from_environment()
    convert(str(good_hf), tmp_path / "cache" / "tiny")  # converted on an earlier start: no network needed
    folders, problems = converted_folders(["local/tiny"], tmp_path / "cache")
    assert folders == [tmp_path / "cache" / "tiny"] and problems == {}
    registry = discover(tmp_path / "no-checkpoints-here", folders)
    assert registry.choices == [("English → German (tiny)", "tiny")]


def test_every_view_renders_a_converted_model(good_hf, tmp_path):
    """The page's every view and analysis, in-process, on a converted model served beside nothing else."""
    from explorer.registry import discover
    from explorer.request import Request
    from explorer.shell import build_demo

    folder = convert(str(good_hf), tmp_path / "tiny-marian")
    _, ui = build_demo(discover(tmp_path / "no-checkpoints-here", [folder]))
    for strategy in ("greedy", "beam"):
        named = ui.translate(Request.from_api(ui.registry, "the cat runs over the big house.", model="tiny-marian",
                                              strategy=strategy, max_length=10))
        expected = Translator.from_pretrained(folder).translate("the cat runs over the big house.", strategy=strategy,
                                                                max_length=10)
        assert named["translation"] == expected.text
        assert named["result"].translations[0].tgt_ids == expected.tgt_ids
    from explorer.text import literal
    from explorer.views.model import card_markdown

    card = card_markdown(ui.registry.get("tiny-marian").profile)
    assert "Converted from Hugging Face" in card and literal("cc-by-4.0") in card and "✓ matches" in card


def test_a_converted_model_patches_as_hugging_face_with_a_layer_output_swapped(pair):
    """Activation patching (core/patching.py) on the converted model, against Hugging Face's model with the first
    encoder layer's output at one position swapped by a forward hook."""
    from transformer import patch, record

    hf_model, hf_tokenizer, ours = pair
    inputs, decoder_input, _ = batch(hf_tokenizer, SOURCES[:1], sentences(GERMAN, 1, seed=12))
    clean = inputs["input_ids"]
    corrupted = clean.clone()
    corrupted[0, 1] = clean[0, 2]
    kept = {}

    def swap(module, args, output):
        hidden = output[0] if isinstance(output, tuple) else output
        if "clean" not in kept:
            kept["clean"] = hidden.clone()
            return output
        hidden = hidden.clone()
        hidden[:, 1] = kept["clean"][:, 1]
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    with torch.no_grad():
        handle = hf_model.model.encoder.layers[0].register_forward_hook(swap)
        hf_model(input_ids=clean, decoder_input_ids=decoder_input)
        expected = hf_model(input_ids=corrupted, decoder_input_ids=decoder_input).logits
        handle.remove()
        with record(ours.model, "encoder_layers.0.output") as rec:
            ours.model(clean, decoder_input)
        with patch(ours.model, {"encoder_layers.0.output": rec["encoder_layers.0.output"]}, positions=[1]):
            actual = ours.model(corrupted, decoder_input)
        unpatched = ours.model(corrupted, decoder_input)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=0)  # as the teacher-forced comparison above
    assert not torch.allclose(actual, unpatched, atol=1e-3)
