"""The stages before the first layer: the sentence to ids, and each side's embedding, scale and positional encoding."""
from __future__ import annotations

from ...symbol_tokenizer import SymbolTokenizer
from .context import WalkContext, is_byte_piece, norm_of, vector
from .stage import Numbers
from .text import phrase


def text_to_ids(walk: WalkContext, tokenizer) -> None:
    t, unk = walk.t, walk.config.unk_id
    unknown = [p for p, i in zip(t.src_tokens, t.src_ids) if i == unk]
    spelled = [p for p in t.src_tokens if is_byte_piece(p)]
    # byte fallback is the tokenizer's (a checkpoint's SentencePiece model may lack it): the text says so only then
    byte_fallback = tokenizer.piece_to_id("<0xCE>") != unk
    unknown_text = phrase("unknown.some" if unknown else "unknown.none", count=len(unknown), unk=unk)
    bytes_text = (phrase("bytes.some", count=len(spelled), first=spelled[0]) if spelled else
                  phrase("bytes.fallback" if byte_fallback else "bytes.none"))
    pieces = list(t.src_tokens)
    ids = [Numbers("pieces", "piece", "tokens", pieces, cols=pieces),
           Numbers("ids", "id", "tokens", [int(i) for i in t.src_ids], cols=pieces)]
    unknown_row = Numbers("unknown", "unknown (<unk>)", "tokens", [int(i) == unk for i in t.src_ids], cols=pieces)
    vocabulary = Numbers("vocabulary", "pieces in the vocabulary", "scalar", int(tokenizer.vocab_size))
    if isinstance(tokenizer, SymbolTokenizer):  # a playground's symbols: no word marks, no bytes
        walk.add("text.pieces", "text", "text", "text.symbols", "text", [*ids, unknown_row, vocabulary],
                 ("piece", "id", "<unk>", "</s>"), vocab=int(tokenizer.vocab_size), unknown=unknown_text)
        return
    walk.add("text.pieces", "text", "text", "text.pieces", "text",
             [*ids, Numbers("starts_word", "starts a word (▁)", "tokens", [p.startswith("▁") for p in pieces],
                            cols=pieces),
              unknown_row,
              Numbers("byte", "a byte (<0x..>)", "tokens", [is_byte_piece(p) for p in pieces], cols=pieces),
              vocabulary],
             ("piece", "▁", "id", "<unk>", "</s>"), vocab=int(tokenizer.vocab_size), unknown=unknown_text,
             bytes=bytes_text)


def embedding_stages(walk: WalkContext, side: str, position: int, piece: str) -> None:
    rec, config, d = walk.rec, walk.config, walk.config.d_model
    row = rec[f"{side}_embedding_row"][position]
    scaled = rec[f"{side}_embedding_scaled"][position]
    block = "input" if side == "encoder" else "target"
    number = walk.position_number(position)
    biggest = int(row.abs().argmax())
    scale = float(scaled[biggest] / row[biggest]) if float(row[biggest]) else float("nan")
    tied = phrase("shared_embeddings") if config.share_embeddings else ""
    rows = config.src_vocab_size if side == "encoder" else config.tgt_vocab_size
    title = side.capitalize()
    walk.add(f"{side}.embedding", block, block, "embedding", "embed",
             [vector("embedding_row", f"E[{piece}]", row), Numbers("norm", "‖e‖", "scalar", norm_of(row))],
             ("embedding", "d_model"), side=title, piece=piece, position=number, rows=rows, tied=tied)
    root = phrase("root", d_model=d) if abs(scale - d ** 0.5) < 1e-3 * d ** 0.5 else ""
    walk.add(f"{side}.scaled", block, block, "scaled.none" if abs(scale - 1) < 1e-6 else "scaled", "embed",
             [vector("embedding_scaled", "e × scale", scaled), Numbers("scale", "scale", "scalar", scale),
              Numbers("norm", "‖e × scale‖", "scalar", norm_of(scaled))], ("d_model",),
             side=title, scale=f"{scale:.4g}", root=root)
    positions = rec[f"{side}_positions"][position]
    if config.pos_encoding == "sinusoidal":
        layout_name = getattr(config, "sinusoidal_layout", "interleaved")
        layout = phrase(f"layout.{layout_name}")
        formula = phrase(f"formula.{layout_name}", offset=config.position_offset)
        words = "positions.sinusoidal"
    elif config.pos_encoding == "relative":
        layout, formula, words = "", "", "positions.relative"
    else:
        layout, formula, words = "", "", "positions.learned"
    walk.add(f"{side}.positions", block, block, words, "positions",
             [vector("positions", f"PE(position {number})", positions),
              Numbers("position", "position", "scalar", number)],
             ("positional encoding",), side=title, position=number, layout=layout, formula=formula)
    total = rec[f"{side}_input"][position]
    walk.add(f"{side}.input", block, block, "input", "embed",
             [vector("embedding_scaled", "e × scale", scaled), vector("positions", f"PE(position {number})", positions),
              vector("input", "x₀", total), Numbers("norm", "‖x₀‖", "scalar", norm_of(total))],
             ("residual stream",), side=title)


def decoder_inputs(walk: WalkContext) -> None:
    step, inputs = walk.step, walk.inputs
    shown_inputs = inputs[: step + 1]
    walk.add("decoder.inputs", "target", "target", "decoder.inputs", "decoder_inputs",
             [Numbers("inputs", "decoder input", "tokens", shown_inputs, cols=shown_inputs)],
             ("<s>", "decoder"), step=walk.position_number(step), piece=inputs[step])
