"""Marian's tokenizer layout (OPUS-MT): two SentencePiece models and one shared vocabulary.

    source.spm   cuts source text into pieces
    target.spm   cuts target text into pieces, and joins target pieces back into text
    vocab.json   piece -> id for both languages; its ids are the model's ids (not the SentencePiece ones)

Special pieces: </s> ends every sentence, <unk> stands for a piece the vocabulary lacks, <pad> pads and is also the
decoder's start token (Marian has no <s>). The ids and texts equal those of Hugging Face's `MarianTokenizer`
(tests/test_marian.py holds them equal): text is split at the special pieces' strings and at a leading language
code such as `>>de<<`, each part goes through SentencePiece, and a piece missing from vocab.json becomes <unk>.
Decoding drops the special ids and joins the pieces with the target model, as `MarianTokenizer.decode(ids,
skip_special_tokens=True, use_source_tokenizer=False)` does.

Same interface as tokenizer.Tokenizer, so a converted checkpoint decodes, records and analyses like ours.
"""
from __future__ import annotations

import json
import re
from functools import cached_property
from pathlib import Path

import sentencepiece as spm

from .tokenizer import load_processor, piece_of
from .unicode_text import check_text

SOURCE_FILE, TARGET_FILE, VOCAB_FILE = "source.spm", "target.spm", "vocab.json"
EOS_PIECE, UNK_PIECE, PAD_PIECE = "</s>", "<unk>", "<pad>"
WORD_BOUNDARY = "\u2581"  # SentencePiece's "▁"


def read_vocabulary(path: Path) -> dict[str, int]:
    """vocab.json: a JSON object of piece -> id, ids 0..n-1 each used once, with </s>, <unk> and <pad>."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: vocabulary file is missing")
    try:
        vocabulary = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error
    if not isinstance(vocabulary, dict) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in vocabulary.values()):
        raise ValueError(f"{path}: expected a JSON object of piece -> integer id")
    if sorted(vocabulary.values()) != list(range(len(vocabulary))):
        raise ValueError(f"{path}: ids must be 0..{len(vocabulary) - 1}, each used once")
    missing = [p for p in (EOS_PIECE, UNK_PIECE, PAD_PIECE) if p not in vocabulary]
    if missing:
        raise ValueError(f"{path}: the special pieces {missing} are missing")
    return vocabulary


class MarianTokenizer:
    def __init__(self, source: spm.SentencePieceProcessor, target: spm.SentencePieceProcessor,
                 vocabulary: dict[str, int], decoder_start_id: int | None = None):
        self.source, self.target, self.vocabulary = source, target, vocabulary
        self.eos_id, self.unk_id, self.pad_id = (vocabulary[p] for p in (EOS_PIECE, UNK_PIECE, PAD_PIECE))
        # the decoder's first input; Marian starts from <pad>
        self.bos_id = self.pad_id if decoder_start_id is None else decoder_start_id
        if not 0 <= self.bos_id < len(vocabulary):
            raise ValueError(f"decoder_start_id must be in [0, {len(vocabulary)}), got {self.bos_id}")
        self.special_ids = frozenset((self.eos_id, self.unk_id, self.pad_id))
        # the special pieces' strings cut text before SentencePiece sees it (so "</s>" typed is the </s> id)
        self.special_split = re.compile("(" + "|".join(map(re.escape, (EOS_PIECE, UNK_PIECE, PAD_PIECE))) + ")")

    @classmethod
    def load(cls, directory, decoder_start_id: int | None = None) -> "MarianTokenizer":
        directory = Path(directory)
        return cls(load_processor(directory / SOURCE_FILE), load_processor(directory / TARGET_FILE),
                   read_vocabulary(directory / VOCAB_FILE), decoder_start_id)

    @property
    def files(self) -> tuple[str, ...]:
        """The files a checkpoint folder keeps this tokenizer in."""
        return (SOURCE_FILE, TARGET_FILE, VOCAB_FILE)

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def _pieces(self, text: str, processor: spm.SentencePieceProcessor) -> list[str]:
        pieces = []
        for part in self.special_split.split(check_text("text", text)):
            if part in (EOS_PIECE, UNK_PIECE, PAD_PIECE):
                pieces.append(part)
                continue
            if part.startswith(">>") and (end := part.find("<<")) != -1:  # a language code, a piece of its own
                pieces.append(part[: end + 2])
                part = part[end + 2:]
            if part:
                pieces += processor.encode(part, out_type=str)
        return pieces

    def _ids(self, pieces: list[str]) -> list[int]:
        return [self.vocabulary.get(piece, self.unk_id) for piece in pieces]

    def encode(self, text: str) -> list[int]:
        """Source text -> ids, without the </s> that ends a source (Translator.source_ids adds it)."""
        return self._ids(self._pieces(text, self.source))

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    def encode_target(self, text: str) -> list[int]:
        """Target text (a forced prefix, a reference) -> ids, through the target model."""
        return self._ids(self._pieces(text, self.target))

    def encode_target_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode_target(text) for text in texts]

    def pieces(self, text: str) -> list[str]:
        """Target-language text as pieces (a typed what-if continuation)."""
        return self._pieces(text, self.target)

    @cached_property
    def piece_table(self) -> list[str]:
        table = [""] * len(self.vocabulary)
        for piece, token_id in self.vocabulary.items():
            table[token_id] = piece
        return table

    def id_to_piece(self, token_id: int) -> str:
        return piece_of(self.piece_table, token_id)

    def piece_to_id(self, piece: str) -> int:
        """The id of `piece`, or the unknown id when the vocabulary has no such piece."""
        return self.vocabulary.get(piece, self.unk_id)

    def decode(self, ids) -> str:
        """Target ids -> text; the special ids (</s>, <unk>, <pad>) are dropped, as Hugging Face drops them."""
        pieces = [self.piece_table[int(i)] for i in ids if int(i) not in self.special_ids]
        return self.target.decode_pieces(pieces).replace(WORD_BOUNDARY, " ").strip()
