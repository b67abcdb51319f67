"""A thin layer over sentencepiece with fixed special ids: one joint model for both languages.

Ids: 0 <pad>, 1 <unk>, 2 <s> (BOS, starts every decoder input), 3 </s> (EOS, ends every sentence).
Marian models converted from Hugging Face bring their own layout (marian_tokenizer.py); code that runs with
either reads the ids from the tokenizer (`tokenizer.eos_id`) or from the model's config, never these constants.
"""
from __future__ import annotations

import io
from functools import cached_property
from pathlib import Path

import sentencepiece as spm

from .unicode_text import check_text

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3



def load_processor(path: Path) -> spm.SentencePieceProcessor:
    """A SentencePiece model file, loaded; a missing one is a FileNotFoundError and a bad one a ValueError, each naming
    the file (our tokenizer and Marian's read their models through it)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: sentencepiece model file is missing")
    processor = spm.SentencePieceProcessor()
    try:
        processor.load(str(path))
    except (OSError, RuntimeError) as error:
        raise ValueError(f"{path}: not a valid sentencepiece model ({error})") from error
    return processor


def piece_of(table: list[str], token_id: int) -> str:
    """The piece of `token_id` in a tokenizer's piece table, or an IndexError naming the range (every tokenizer's
    id_to_piece)."""
    token_id = int(token_id)
    if not 0 <= token_id < len(table):
        raise IndexError(f"piece id {token_id} is out of range [0, {len(table)})")
    return table[token_id]


class Tokenizer:
    def __init__(self, processor: spm.SentencePieceProcessor):
        self.processor = processor
        for name, expected in (("pad", PAD_ID), ("unk", UNK_ID), ("bos", BOS_ID), ("eos", EOS_ID)):
            actual = getattr(processor, f"{name}_id")()
            if actual != expected:
                raise ValueError(f"sentencepiece model has {name} id {actual}, this project needs {expected}")

    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    @classmethod
    def train(cls, text_files, model_path, vocab_size: int = 8000, model_type: str = "unigram",
              character_coverage: float = 1.0) -> "Tokenizer":
        """Trains on the given files (one sentence per line) and writes `model_path` (a .model file)."""
        model_path = Path(model_path)
        model_path.parent.mkdir(parents=True, exist_ok=True)
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            input=",".join(str(f) for f in text_files), model_writer=model, vocab_size=vocab_size,
            model_type=model_type, character_coverage=character_coverage,
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            pad_piece="<pad>", unk_piece="<unk>", bos_piece="<s>", eos_piece="</s>",
            byte_fallback=True,  # characters unseen in training become byte pieces and still round-trip
            input_sentence_size=2_000_000, shuffle_input_sentence=True, minloglevel=2,
        )
        model_path.write_bytes(model.getvalue())
        return cls.load(model_path)

    @classmethod
    def load(cls, model_path) -> "Tokenizer":
        return cls(load_processor(Path(model_path)))

    @property
    def vocab_size(self) -> int:
        return self.processor.get_piece_size()

    def encode(self, text: str) -> list[int]:
        return self.processor.encode(check_text("text", text), out_type=int)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self.processor.encode([check_text("text", text) for text in texts], out_type=int)

    # target-language text (a forced prefix, a reference); one joint model here, two in Marian's layout
    encode_target, encode_target_batch = encode, encode_batch

    @property
    def files(self) -> tuple[str, ...]:
        """The files a checkpoint folder keeps this tokenizer in."""
        return ("spm.model",)

    def pieces(self, text: str) -> list[str]:
        """Target-language text as pieces (a typed what-if continuation)."""
        return self.processor.encode(check_text("text", text), out_type=str)

    @cached_property
    def piece_table(self) -> list[str]:
        """Every id's piece, read once: decoding labels each step's candidates, a beam-4 sentence ~1,700 of them,
        and each call into sentencepiece costs more than the lookup."""
        return [self.processor.id_to_piece(i) for i in range(self.vocab_size)]

    def id_to_piece(self, token_id: int) -> str:
        return piece_of(self.piece_table, token_id)

    def piece_to_id(self, piece: str) -> int:
        """The id of `piece`, or the unknown id when the vocabulary has no such piece."""
        return self.processor.piece_to_id(piece)

    def decode(self, ids) -> str:
        """Ids -> text; special ids (pad, bos, eos) are dropped."""
        return self.processor.decode([int(i) for i in ids if int(i) not in (PAD_ID, BOS_ID, EOS_ID)])
