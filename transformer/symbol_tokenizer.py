"""A tokenizer over a small fixed list of symbols: the playground's toy tasks (transformer/playground/), whose
vocabularies are a few dozen pieces ("7", "twenty", "und", "March").

Text is cut by the longest piece that matches at each place; spaces only separate and are dropped. A character no
piece matches is the unknown piece. Decoding joins the target's pieces with the vocabulary's `joiner` ("" for
"einundzwanzig", " " for "3 1 4"). The ids 0-3 are the specials of our sentencepiece tokenizer (tokenizer.py), so
every tool that reads `tokenizer.eos_id` works unchanged. A checkpoint keeps it as symbols.json, which config.json's
"tokenizer" section names ("type": "symbols").
"""
from __future__ import annotations

import json
from pathlib import Path

from .json_files import read_json
from .tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, piece_of
from .unicode_text import check_text

SYMBOLS_FILE = "symbols.json"
SPECIALS = ("<pad>", "<unk>", "<s>", "</s>")


class SymbolTokenizer:
    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def __init__(self, symbols: list[str], joiner: str = " "):
        problems = [s for s in symbols if not isinstance(s, str) or not s or s.strip() != s or s in SPECIALS]
        if problems or len(set(symbols)) != len(symbols):
            raise ValueError(f"symbols must be distinct non-empty pieces without spaces, not {SPECIALS}; got "
                             f"{problems or 'duplicates'}")
        self.symbols = list(symbols)
        self.joiner = joiner
        self.piece_table = [*SPECIALS, *symbols]
        self._ids = {piece: i for i, piece in enumerate(self.piece_table)}
        self._longest_first = sorted(symbols, key=len, reverse=True)

    @classmethod
    def load(cls, path) -> "SymbolTokenizer":
        values = read_json(path, ValueError)
        if not isinstance(values.get("symbols"), list) or not isinstance(values.get("joiner", " "), str):
            raise ValueError(f"{path}: needs 'symbols' (a list of pieces) and 'joiner' (text)")
        return cls(values["symbols"], values.get("joiner", " "))

    def save(self, path) -> Path:
        path = Path(path)
        path.write_text(json.dumps({"symbols": self.symbols, "joiner": self.joiner}, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        return path

    @property
    def files(self) -> tuple[str, ...]:
        return (SYMBOLS_FILE,)

    @property
    def vocab_size(self) -> int:
        return len(self.piece_table)

    def pieces(self, text: str) -> list[str]:
        """The longest matching piece at each place; spaces dropped; an unmatched character is "<unk>"."""
        text, out, at = check_text("text", text), [], 0
        while at < len(text):
            if text[at].isspace():
                at += 1
                continue
            piece = next((s for s in self._longest_first if text.startswith(s, at)), None)
            out.append(piece or "<unk>")
            at += len(piece) if piece else 1
        return out

    def encode(self, text: str) -> list[int]:
        return [self._ids[piece] for piece in self.pieces(text)]

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [self.encode(text) for text in texts]

    encode_target, encode_target_batch = encode, encode_batch

    def id_to_piece(self, token_id: int) -> str:
        return piece_of(self.piece_table, token_id)

    def piece_to_id(self, piece: str) -> int:
        return self._ids.get(piece, UNK_ID)

    def decode(self, ids) -> str:
        """Ids -> text joined by the joiner; pad, bos and eos dropped."""
        return self.joiner.join(self.piece_table[int(i)] for i in ids if int(i) not in (PAD_ID, BOS_ID, EOS_ID))
