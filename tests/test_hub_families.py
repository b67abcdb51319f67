"""The Hugging Face families (transformer/convert.py) against Hugging Face's own code: tiny random models of odd
shapes (encoder and decoder of different depths, head counts that are not powers of two, T5 v1.1's heads x d_kv
wider than d_model) built with `transformers`, saved as save_pretrained writes them, converted, and compared:
tokenizer ids equal, teacher-forced logits within 1e-4, greedy ids equal to `generate`, every cross-attention weight
within 1e-5 of `output_attentions`."""
from __future__ import annotations

import io
import json
import shutil

import pytest
import torch

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

from transformer.convert import convert, main  # noqa: E402
from transformer.core.capture import capture_attention  # noqa: E402
from transformer.decoding.translator import Translator  # noqa: E402
from transformer.marian_config import ConversionError  # noqa: E402

SENTENCES = ["Where is the train station?", "Der Hund läuft im Park.", "Two men are playing chess outside.",
             "I would like a cup of coffee, please.", "Zwei Männer, 3 Katzen & ein Sofa!"]
CORPUS = ["A dog runs in the park.", "Where is the train station?", "Der Hund läuft im Park.", "Wo ist der Bahnhof?",
          "Two men are playing chess outside.", "Zwei Männer spielen draußen Schach.",
          "The cat sleeps on the warm sofa.", "Die Katze schläft auf dem warmen Sofa.",
          "I would like a cup of coffee, please.", "Ich hätte gern eine Tasse Kaffee."] * 20
NLLB_CODES = ["eng_Latn", "deu_Latn", "fra_Latn"]
# atol: float32 sums in another order (our stacked q|k|v projection, SDPA against an explicit softmax)
LOGITS_TOLERANCE, ATTENTION_TOLERANCE = 1e-4, 1e-5


def sentencepiece_model(path, **ids) -> None:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model, vocab_size=80,
                                   model_type="unigram", character_coverage=1.0, minloglevel=2, **ids)
    path.write_bytes(model.getvalue())


def shapes(**extra) -> dict:
    """Encoder 3 layers of 3 heads, decoder 2 of 6 heads, d_model 24: nothing a power of two."""
    return dict(d_model=24, encoder_layers=3, decoder_layers=2, encoder_attention_heads=3, decoder_attention_heads=6,
                encoder_ffn_dim=40, decoder_ffn_dim=36, max_position_embeddings=64, dropout=0.0,
                attention_dropout=0.0, activation_dropout=0.0, init_std=0.2, pad_token_id=1, bos_token_id=0,
                eos_token_id=2, decoder_start_token_id=2, **extra)


def build_nllb(work):
    sentencepiece_model(work / "sentencepiece.bpe.model", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    tokenizer = transformers.NllbTokenizer.from_pretrained(work, src_lang="eng_Latn", tgt_lang="deu_Latn",
                                                           extra_special_tokens=NLLB_CODES)
    config = transformers.M2M100Config(vocab_size=len(tokenizer), scale_embedding=True,
                                       activation_function="relu", **shapes())
    return tokenizer, transformers.M2M100ForConditionalGeneration(config), {"source_lang": "eng_Latn",
                                                                           "target_lang": "deu_Latn"}


def build_mbart50(work):
    sentencepiece_model(work / "sentencepiece.bpe.model", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    tokenizer = transformers.MBart50Tokenizer.from_pretrained(work, src_lang="en_XX", tgt_lang="de_DE")
    config = transformers.MBartConfig(vocab_size=len(tokenizer), scale_embedding=True, activation_function="gelu",
                                      **shapes())
    return tokenizer, transformers.MBartForConditionalGeneration(config), {"source_lang": "en_XX",
                                                                          "target_lang": "de_DE"}


def build_t5(work, gated: bool):
    sentencepiece_model(work / "spiece.model", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    tokenizer = transformers.T5Tokenizer.from_pretrained(work, extra_ids=3)
    settings = dict(vocab_size=len(tokenizer), d_model=24, num_heads=3, num_layers=3, num_decoder_layers=2,
                    relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0,
                    pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    if gated:  # T5 v1.1 / FLAN-T5: gated GELU, untied head, 3 heads of 10: 30 wide against d_model 24
        config = transformers.T5Config(d_kv=10, d_ff=40, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                                       **settings)
    else:
        config = transformers.T5Config(d_kv=8, d_ff=40, feed_forward_proj="relu", **settings)
    return tokenizer, transformers.T5ForConditionalGeneration(config), {}


def build_bart(work):
    from tokenizers import ByteLevelBPETokenizer  # noqa: PLC0415

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    trainer.save_model(str(work))
    vocab = json.loads((work / "vocab.json").read_text())
    merges = [tuple(line.split()) for line in (work / "merges.txt").read_text().splitlines()[1:] if line]
    tokenizer = transformers.BartTokenizer(vocab=vocab, merges=merges)
    config = transformers.BartConfig(vocab_size=len(tokenizer), scale_embedding=False, activation_function="gelu",
                                     **shapes())
    return tokenizer, transformers.BartForConditionalGeneration(config), {}


BUILDERS = {"nllb": build_nllb, "mbart50": build_mbart50, "t5": lambda w: build_t5(w, False),
            "flan-t5": lambda w: build_t5(w, True), "bart": build_bart}


class Pair:
    """One family's Hugging Face model, tokenizer and our conversion of them."""

    def __init__(self, name, root):
        work = root / f"{name}-hf"
        work.mkdir()
        torch.manual_seed(0)
        self.tokenizer, model, self.languages = BUILDERS[name](work)
        # output_attentions needs the explicit softmax
        self.model = type(model).from_pretrained(*self.saved(model, work), attn_implementation="eager").eval()
        # BART's and mBART's configs force </s> at the length limit, which our decoding does not
        self.model.generation_config.forced_eos_token_id = None
        self.folder = work
        self.ours = Translator.from_pretrained(convert(work, root / name, **self.languages))
        self.forced = ([self.tokenizer.convert_tokens_to_ids(self.languages["target_lang"])]
                       if self.languages else [])

    def saved(self, model, work):
        model.save_pretrained(work)
        self.tokenizer.save_pretrained(work)
        return (work,)

    def source(self, text: str) -> list[int]:
        return self.tokenizer(text).input_ids


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def pair(request, tmp_path_factory):
    return Pair(request.param, tmp_path_factory.mktemp("hub"))


def test_tokenizer_ids_equal_hugging_faces(pair):
    for text in SENTENCES:
        assert pair.ours.source_ids(text)[0] == pair.source(text)
        assert pair.ours.tokenizer.decode(pair.source(text)) == pair.tokenizer.decode(
            pair.source(text), skip_special_tokens=True).strip()


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
