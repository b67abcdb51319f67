"""The Hugging Face families (transformer/convert.py) against Hugging Face's own code: tiny random models of odd
shapes (encoder and decoder of different depths, head counts that are not powers of two, T5 v1.1's heads x d_kv
wider than d_model) built with `transformers`, saved as save_pretrained writes them, converted, and compared:
tokenizer ids equal, teacher-forced logits within 1e-4, greedy ids equal to `generate`, every cross-attention weight
within 1e-5 of `output_attentions`."""
from __future__ import annotations

import copy
import json
import shutil

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

from explorer.profile import profile_model  # noqa: E402
from explorer.views.model import card_markdown  # noqa: E402
from transformer.convert import convert, main  # noqa: E402
from transformer.core.capture import capture_attention  # noqa: E402
from transformer.core.fused_step import why_not_fused  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402
from transformer.marian_config import ConversionError  # noqa: E402

from .hub_fixtures import BUILDERS, SENTENCES, Pair  # noqa: E402

# atol: float32 sums in another order (our stacked q|k|v projection, SDPA against an explicit softmax)
LOGITS_TOLERANCE, ATTENTION_TOLERANCE = 1e-4, 1e-5

@pytest.fixture(scope="module", params=sorted(BUILDERS))
def pair(request, tmp_path_factory):
    return Pair(request.param, tmp_path_factory.mktemp("hub"))


def test_tokenizer_ids_equal_hugging_faces(pair):
    for text in SENTENCES:
        assert pair.ours.source_ids(text)[0] == pair.source(text)
        # transformers 5's M2M100Tokenizer keeps "__en__" in decoded text (its language tokens are not special
        # there); ours drops every language code, as the other families' tokenizers do: compared without it
        ids = [i for i in pair.source(text) if i not in pair.ours.tokenizer.languages.values()] if hasattr(
            pair.ours.tokenizer, "languages") else pair.source(text)
        assert pair.ours.tokenizer.decode(ids) == pair.tokenizer.decode(ids, skip_special_tokens=True).strip()


@torch.no_grad()
def test_teacher_forced_logits_and_cross_attention_equal_hugging_faces(pair):
    start = pair.model.config.decoder_start_token_id
    for text in SENTENCES[:3]:
        src = torch.tensor([pair.source(text)])
        tgt = torch.tensor([[start, *pair.forced, *pair.source(SENTENCES[1])[2:9]]])
        theirs = pair.model(input_ids=src, decoder_input_ids=tgt, output_attentions=True)
        with capture_attention(pair.ours.model) as attention:
            logits = pair.ours.model(src, tgt)
        torch.testing.assert_close(logits, theirs.logits, atol=LOGITS_TOLERANCE, rtol=0)
        torch.testing.assert_close(attention.cross, torch.stack(theirs.cross_attentions), atol=ATTENTION_TOLERANCE,
                                   rtol=0)
        torch.testing.assert_close(attention.encoder_self, torch.stack(theirs.encoder_attentions),
                                   atol=ATTENTION_TOLERANCE, rtol=0)
        # and without any capture, through the fused attention
        torch.testing.assert_close(pair.ours.model(src, tgt), theirs.logits, atol=LOGITS_TOLERANCE, rtol=0)


@torch.no_grad()
def test_greedy_ids_equal_generate(pair):
    config = pair.model.config
    for text in SENTENCES:
        src = torch.tensor([pair.source(text)])
        generation = transformers.GenerationConfig(
            max_new_tokens=12, num_beams=1, do_sample=False, decoder_start_token_id=config.decoder_start_token_id,
            eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
            forced_bos_token_id=pair.forced[0] if pair.forced else None,
            suppress_tokens=[config.pad_token_id])  # ours never produces padding
        expected = pair.model.generate(src, generation_config=generation)[0, 1:].tolist()
        ours = pair.ours.translate(text, strategy="greedy", max_length=12)
        assert ours.tgt_ids == expected
        captured = pair.ours.translate(text, strategy="greedy", max_length=12, capture=True)
        assert captured.tgt_ids == expected


def test_a_multilingual_model_takes_other_directions_and_names_unknown_codes(tmp_path_factory):
    pair = Pair("nllb", tmp_path_factory.mktemp("hub"))
    french = pair.ours.translate(SENTENCES[0], strategy="greedy", max_length=6, source_lang="deu_Latn",
                                 target_lang="fra_Latn")
    assert french.src_ids[0] == pair.tokenizer.convert_tokens_to_ids("deu_Latn")
    assert french.tgt_ids[0] == pair.tokenizer.convert_tokens_to_ids("fra_Latn")
    with pytest.raises(ValueError, match="target_lang: unknown language code 'xx_Latn'"):
        pair.ours.translate(SENTENCES[0], target_lang="xx_Latn")


@pytest.fixture(scope="module")
def bart(tmp_path_factory):
    return Pair("bart", tmp_path_factory.mktemp("hub"))


def folder_copy(pair, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(pair.folder, copy)
    return copy


@pytest.mark.parametrize("damage, message", [
    (lambda f: (f / "tokenizer.json").unlink(), "tokenizer.json: tokenizer file is missing"),
    (lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:2000]),
     "model.safetensors: truncated or unreadable"),
    (lambda f: (f / "config.json").write_text(json.dumps({**json.loads((f / "config.json").read_text()),
                                                          "model_type": "gpt2"})), "model_type is 'gpt2'"),
    (lambda f: (f / "config.json").write_text(json.dumps({**json.loads((f / "config.json").read_text()),
                                                          "d_model": 30})), "config.json implies"),
    (lambda f: (f / "config.json").write_text(json.dumps({**json.loads((f / "config.json").read_text()),
                                                          "vocab_size": 7})), "does not match the weights'"),
])
def test_a_bad_folder_is_one_line_and_leaves_no_out(damage, message, tmp_path, bart, capsys):
    source = folder_copy(bart, tmp_path)
    damage(source)
    out = tmp_path / "out"
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        main([str(source), str(out)])
    assert ended.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error, error
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(tmp_path, tmp_path_factory):
    pair = Pair("t5", tmp_path_factory.mktemp("hub"))
    source = folder_copy(pair, tmp_path)
    tokens = json.loads((source / "tokenizer.json").read_text())
    tokens["added_tokens"].append({"id": 500, "content": "<extra>", "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": True})
    (source / "tokenizer.json").write_text(json.dumps(tokens))
    with pytest.raises(ConversionError, match="not this model's tokenizer"):
        convert(source, tmp_path / "out")


@torch.no_grad()
def test_float16_weights_equal_hugging_face_on_the_same_rounded_weights_through_the_kernel(kernel, tmp_path):
    """--dtype float16: ours equals Hugging Face's model whose every weight was rounded to float16 the same way, and
    NLLB's layers (pre-norm, LayerNorm, ReLU, 1/sqrt(d_k)) then decode through the compiled float16 step, equal to
    the Python step."""
    pair = Pair("nllb", tmp_path)
    half = Translator.from_pretrained(convert(pair.folder, tmp_path / "half", dtype="float16", **pair.languages))
    assert json.loads((tmp_path / "half" / "config.json").read_text())["origin"]["dtype"] == "float16"
    rounded = copy.deepcopy(pair.model)
    for parameter in rounded.parameters():
        parameter.copy_(parameter.half().float())
    src = torch.tensor([pair.source(SENTENCES[0])])
    tgt = torch.tensor([[2, *pair.forced, *pair.source(SENTENCES[1])[2:9]]])
    torch.testing.assert_close(half.model(src, tgt), rounded(input_ids=src, decoder_input_ids=tgt).logits,
                               atol=LOGITS_TOLERANCE, rtol=0)
    assert why_not_fused(half.model, 1) is None
    fused = half.translate(SENTENCES[0], strategy="greedy", max_length=12, capture=True)
    half.model.fused_decoding = False
    python = half.translate(SENTENCES[0], strategy="greedy", max_length=12, capture=True)
    assert fused.tgt_ids == python.tgt_ids
    for kind in ("cross", "decoder_self"):  # the kernel records the attention as the hooks do: float32 rounding
        np.testing.assert_allclose(fused.recorded[kind].values, python.recorded[kind].values, atol=1e-5)


def test_a_hub_name_that_cannot_be_fetched_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # the Hub unreachable, as without the network
    with pytest.raises(ConversionError, match="not a Hub model name"):
        convert("no-such-folder", tmp_path / "out")
    with pytest.raises(ConversionError, match="facebook/nllb-200-distilled-600M: not a folder, and the Hugging Face "
                                              "Hub did not provide it"):
        convert("facebook/nllb-200-distilled-600M", tmp_path / "out", "eng_Latn", "deu_Latn")
    assert list(tmp_path.iterdir()) == []


def test_the_hub_setting_serves_a_family_with_its_direction(tmp_path, monkeypatch):
    from explorer.hub_models import SWITCH, converted_folders, hub_models_from_environment  # noqa: PLC0415
    from explorer.registry import discover  # noqa: PLC0415

    entry = "facebook/nllb-200-distilled-600M:fra_Latn:eng_Latn"
    monkeypatch.setenv(SWITCH, f"Helsinki-NLP/opus-mt-en-de, {entry}")
    assert hub_models_from_environment() == ["Helsinki-NLP/opus-mt-en-de", entry]
    monkeypatch.setenv(SWITCH, "facebook/nllb:eng_Latn")
    with pytest.raises(ValueError, match="name:source:target|eng_Latn:deu_Latn"):
        hub_models_from_environment()
    pair = Pair("nllb", tmp_path)  # converted on an earlier start (a cached folder): no network needed
    cache = tmp_path / "cache"
    convert(pair.folder, cache / "nllb-200-distilled-600M", "fra_Latn", "eng_Latn")
    folders, problems = converted_folders([entry], cache)
    assert folders == [cache / "nllb-200-distilled-600M"] and problems == {}
    served = discover(tmp_path / "none", folders)
    assert served.default_languages("nllb-200-distilled-600M") == ("fra_Latn", "eng_Latn")


def test_the_model_card_counts_and_names_each_familys_arithmetic(pair):
    """The Model tab's card: the closed-form parameter count (core/params.py, written out by hand) equals the model's
    own, and the arithmetic named is the family's."""
    profile = profile_model(pair.ours)
    assert profile.parameters == profile.closed_form_parameters
    card = card_markdown(profile)
    config = pair.ours.model.config
    assert "✓ matches" in card and ("RMS norm" in card) == (config.norm_kind == "rms")
    assert ("relative position buckets" in card) == (config.pos_encoding == "relative")
    assert ("a norm on the embeddings" in card) == config.embedding_norm
