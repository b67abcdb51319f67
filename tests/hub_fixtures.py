"""Tiny random Hugging Face models of each family, built with `transformers` as save_pretrained writes them, and our
conversion of them (transformer/convert.py): odd shapes (encoder and decoder of different depths, head counts that
are not powers of two, T5 v1.1's heads x d_kv wider than d_model)."""
from __future__ import annotations

import io
import json

import torch

from transformer.convert import convert
from transformer.decoding.translator import Translator


def hf():
    import transformers  # noqa: PLC0415  (a test dependency; the package never imports it)

    return transformers


def sentencepiece():
    import sentencepiece as spm  # noqa: PLC0415

    return spm


SENTENCES = ["Where is the train station?", "Der Hund läuft im Park.", "Two men are playing chess outside.",
             "I would like a cup of coffee, please.", "Zwei Männer, 3 Katzen & ein Sofa!"]
CORPUS = ["A dog runs in the park.", "Where is the train station?", "Der Hund läuft im Park.", "Wo ist der Bahnhof?",
          "Two men are playing chess outside.", "Zwei Männer spielen draußen Schach.",
          "The cat sleeps on the warm sofa.", "Die Katze schläft auf dem warmen Sofa.",
          "I would like a cup of coffee, please.", "Ich hätte gern eine Tasse Kaffee."] * 20
NLLB_CODES = ["eng_Latn", "deu_Latn", "fra_Latn"]


def sentencepiece_model(path, **ids) -> None:
    model = io.BytesIO()
    sentencepiece().SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model, vocab_size=80,
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
    tokenizer = hf().NllbTokenizer.from_pretrained(work, src_lang="eng_Latn", tgt_lang="deu_Latn",
                                                           extra_special_tokens=NLLB_CODES)
    config = hf().M2M100Config(vocab_size=len(tokenizer), scale_embedding=True,
                                       activation_function="relu", **shapes())
    return tokenizer, hf().M2M100ForConditionalGeneration(config), {"source_lang": "eng_Latn",
                                                                           "target_lang": "deu_Latn"}


def build_m2m100(work):
    """M2M100 as transformers 5 saves it: sentencepiece.bpe.model and vocab.json (fairseq's ids), no tokenizer.json."""
    sentencepiece_model(work / "sentencepiece.bpe.model", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    processor = sentencepiece().SentencePieceProcessor(model_file=str(work / "sentencepiece.bpe.model"))
    vocabulary = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for piece in map(processor.id_to_piece, range(processor.get_piece_size())):
        vocabulary.setdefault(piece, len(vocabulary))
    (work / "vocab.json").write_text(json.dumps(vocabulary))
    tokenizer = hf().M2M100Tokenizer(vocab_file=str(work / "vocab.json"),
                                     spm_file=str(work / "sentencepiece.bpe.model"), src_lang="en", tgt_lang="de")
    # the model's rows: the vocabulary, M2M100's 100 language codes and its 8 made-up words
    config = hf().M2M100Config(vocab_size=len(vocabulary) + 108, scale_embedding=True, activation_function="relu",
                               **shapes())
    return tokenizer, hf().M2M100ForConditionalGeneration(config), {"source_lang": "en", "target_lang": "de"}


def build_mbart50(work):
    sentencepiece_model(work / "sentencepiece.bpe.model", unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    tokenizer = hf().MBart50Tokenizer.from_pretrained(work, src_lang="en_XX", tgt_lang="de_DE")
    config = hf().MBartConfig(vocab_size=len(tokenizer), scale_embedding=True, activation_function="gelu",
                                      **shapes())
    return tokenizer, hf().MBartForConditionalGeneration(config), {"source_lang": "en_XX",
                                                                          "target_lang": "de_DE"}


def build_t5(work, gated: bool):
    sentencepiece_model(work / "spiece.model", pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    tokenizer = hf().T5Tokenizer.from_pretrained(work, extra_ids=3)
    settings = dict(vocab_size=len(tokenizer), d_model=24, num_heads=3, num_layers=3, num_decoder_layers=2,
                    relative_attention_num_buckets=8, relative_attention_max_distance=20, dropout_rate=0.0,
                    pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    if gated:  # T5 v1.1 / FLAN-T5: gated GELU, untied head, 3 heads of 10: 30 wide against d_model 24
        config = hf().T5Config(d_kv=10, d_ff=40, feed_forward_proj="gated-gelu", tie_word_embeddings=False,
                                       **settings)
    else:
        config = hf().T5Config(d_kv=8, d_ff=40, feed_forward_proj="relu", **settings)
    return tokenizer, hf().T5ForConditionalGeneration(config), {}


def build_bart(work):
    from tokenizers import ByteLevelBPETokenizer  # noqa: PLC0415

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(CORPUS, vocab_size=300, min_frequency=1,
                                special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    trainer.save_model(str(work))
    vocab = json.loads((work / "vocab.json").read_text())
    merges = [tuple(line.split()) for line in (work / "merges.txt").read_text().splitlines()[1:] if line]
    tokenizer = hf().BartTokenizer(vocab=vocab, merges=merges)
    config = hf().BartConfig(vocab_size=len(tokenizer), scale_embedding=False, activation_function="gelu",
                                     **shapes())
    return tokenizer, hf().BartForConditionalGeneration(config), {}


BUILDERS = {"nllb": build_nllb, "m2m100": build_m2m100, "mbart50": build_mbart50, "t5": lambda w: build_t5(w, False),
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
        self.forced = [self.language_id(self.languages["target_lang"])] if self.languages else []

    def language_id(self, code: str) -> int:
        """Hugging Face's id of a language code (M2M100's tokenizer names `en` by the token `__en__`)."""
        if hasattr(self.tokenizer, "get_lang_id"):
            return self.tokenizer.get_lang_id(code)
        return self.tokenizer.convert_tokens_to_ids(code)

    def saved(self, model, work):
        model.save_pretrained(work)
        self.tokenizer.save_pretrained(work)
        return (work,)

    def source(self, text: str) -> list[int]:
        return self.tokenizer(text).input_ids


# one model of each model_type (and T5's two feed-forwards) for the tests that walk every view: M2M100 differs from
# NLLB only in its tokenizer files, which test_hub_families.py holds equal to Hugging Face's
VIEWED = ("bart", "flan-t5", "mbart50", "nllb", "t5")
