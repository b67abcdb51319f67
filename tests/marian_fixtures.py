"""Tiny Hugging Face Marian folders for the tests: two SentencePiece models and a vocab.json trained here, and a random
`MarianMTModel` saved with `save_pretrained`, laid out as an OPUS-MT folder is (generation_config.json included)."""
from __future__ import annotations

import io
import json
import random
import shutil
from pathlib import Path

import sentencepiece as spm

ENGLISH = ("the a cat dog house tree runs sleeps quickly over under big small red green blue is was with and "
           "child plays ball park water near two girl boy jumps street").split()
GERMAN = ("der die das ein eine Katze Hund Haus Baum läuft schläft schnell über unter groß klein rot grün blau ist "
          "war mit und Kind spielt Ball Park Wasser nahe zwei Mädchen Junge springt Straße").split()
PUNCTUATION = [".", "!", "?", ",", ";", ":", "", " ..."]


def sentences(words: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 8))) + rng.choice(PUNCTUATION) for _ in range(n)]


def train_spm(lines: list[str], path: Path, vocab_size: int) -> None:
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   character_coverage=1.0, hard_vocab_limit=False, minloglevel=2)
    path.write_bytes(model.getvalue())


def write_tokenizer_files(folder: Path) -> Path:
    """source.spm, target.spm and vocab.json as OPUS-MT has them: </s> 0, <unk> 1, both models' pieces, <pad> last.
    Marian's vocabulary ids are not the SentencePiece ids, so the layout is exercised, not assumed."""
    folder.mkdir(parents=True, exist_ok=True)
    train_spm(sentences(ENGLISH, 400, 1), folder / "source.spm", 120)
    train_spm(sentences(GERMAN, 400, 2), folder / "target.spm", 120)
    vocabulary = {"</s>": 0, "<unk>": 1}
    for name in ("source.spm", "target.spm"):
        processor = spm.SentencePieceProcessor(model_file=str(folder / name))
        for i in range(processor.get_piece_size()):
            piece = processor.id_to_piece(i)
            if piece not in ("<unk>", "<s>", "</s>") and piece not in vocabulary:
                vocabulary[piece] = len(vocabulary)
    vocabulary["<pad>"] = len(vocabulary)
    (folder / "vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False, indent=2), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    return folder


def opus_generation_config(pad: int, max_length: int = 64) -> dict:
    """generation_config.json as opus-mt-en-de ships it (with this vocabulary's pad id)."""
    return {"bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad, "eos_token_id": 0,
            "forced_eos_token_id": 0, "max_length": max_length, "num_beams": 4, "pad_token_id": pad,
            "renormalize_logits": True}


def write_hf_marian(folder: Path, tokenizer_dir: Path, activation: str = "swish", share: bool = True,
                    tie: bool = True, logits_bias: bool = False, seed: int = 0, **overrides) -> Path:
    """A random MarianMTModel of a tiny shape, saved as an OPUS-MT folder."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    vocabulary = json.loads((tokenizer_dir / "vocab.json").read_text(encoding="utf-8"))
    pad = vocabulary["<pad>"]
    shape = dict(vocab_size=len(vocabulary), decoder_vocab_size=len(vocabulary), d_model=32, encoder_layers=2,
                 decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                 decoder_ffn_dim=64, max_position_embeddings=128, activation_function=activation, scale_embedding=True,
                 pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
                 share_encoder_decoder_embeddings=share, tie_word_embeddings=tie, init_std=0.3)
    shape.update(overrides)
    torch.manual_seed(seed)
    model = MarianMTModel(MarianConfig(**shape)).eval()
    if logits_bias:
        with torch.no_grad():
            model.final_logits_bias.normal_(0.0, 1.0)
            model.final_logits_bias[0, 0] += 2.0  # </s> likelier, so some translations end before the length limit
    model.save_pretrained(folder)
    for name in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, folder / name)
    (folder / "generation_config.json").write_text(json.dumps(opus_generation_config(pad), indent=2))
    (folder / "README.md").write_text("---\nlicense: cc-by-4.0\n---\n# a random test model\n")
    return folder
