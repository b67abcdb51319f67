"""/patch: what causes one piece of a translation (activation patching, transformer/analysis/causal), validated as
every endpoint is: a bad piece, layer, head or setting is named with its range counted from 1.

    clean       the sentence whose translation is explained (one line)
    corrupted   a second sentence (one line), or "" with noise_word: Gaussian noise on that clean source piece
    target      the piece of the clean translation to explain, from 1; contrast: an optional piece of the vocabulary
    analyses    some of trace, heads, path, attribution (a comma-separated string or a list)
    hold        optional: one cell to hold while the corrupted source is decoded again, "trace residual 2 5"
                (layer 2, source position 5), "heads cross 1 3" (layer 1, head 3) or "path cross 1 3"
"""
from __future__ import annotations

from transformer.analysis.causal import ANALYSES, patching_json
from transformer.analysis.causal.question import NOISE_TIMES_STD
from transformer.analysis.causal.redecode import parse_hold
from transformer.numbers import NumberError, parsed_number

from .api import counted, one_translation
from .request import DEFAULT_MAX_LENGTH, RequestError, check_unicode
from .text import page_error


def checked_analyses(analyses) -> tuple[str, ...]:
    names = analyses.split(",") if isinstance(analyses, str) else analyses
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise page_error(f"analyses must be a comma-separated string or a list of some of {', '.join(ANALYSES)}")
    names = tuple(n.strip() for n in names if n.strip())
    unknown = [n for n in names if n not in ANALYSES]
    if unknown or not names:
        raise page_error(f"analyses: {', '.join(map(repr, unknown)) or 'none given'}; choose some of "
                         f"{', '.join(ANALYSES)}")
    return names


def checked_text(name: str, value) -> str:
    try:
        check_unicode(name, value)
    except RequestError as error:
        raise page_error(str(error)) from error
    return value


def check_types(corrupted, contrast, hold) -> None:
    """The text arguments that may be null, each text or null, before anything reads them; the message names the
    argument and the JSON type it got."""
    wanted = {"corrupted": 'a sentence as text, or "" with noise_word', "contrast": "a piece of the model's "
              "vocabulary, as text, or null", "hold": "one cell as text, such as 'trace residual 2 5', or null"}
    for name, value in (("corrupted", corrupted), ("contrast", contrast), ("hold", hold)):
        if value is not None and not isinstance(value, str):
            raise page_error(f"{name} must be {wanted[name]}; got {type(value).__name__}")


def patch_endpoint(ui):
    def patch(clean: str, corrupted: str = "", target: int = 1, contrast: str = None,
              analyses: str = "trace,heads,path,attribution", noise_word: int = None,
              noise_std: float = NOISE_TIMES_STD, hold: str = None, model: str = None, device: str = "cpu",
              max_length: int = DEFAULT_MAX_LENGTH) -> dict:
        """What causes the piece `target` (from 1) of `clean`'s translation: the clean run's values put back, one
        site at a time, into the run of `corrupted` (or of `clean` with noise on its piece `noise_word`), with the
        target piece's restored share per site; `hold` decodes the corrupted source again with one site put back."""
        counted("target", target)
        analyses = checked_analyses(analyses)
        check_types(corrupted, contrast, hold)
        corrupted = checked_text("corrupted", corrupted) or ""
        if noise_word is None and not corrupted.strip():
            raise page_error("corrupted: the corrupted sentence is empty; type one, or give noise_word (a source "
                             "piece, from 1) to corrupt the clean sentence with noise")
        if noise_word is not None:
            counted("noise_word", noise_word)
            try:
                noise_std = parsed_number("noise_std", noise_std, float, 1e-6, 100.0)  # JSON has no NaN: as text
            except NumberError as error:
                raise page_error(str(error)) from None
        if contrast is not None:
            checked_text("contrast", contrast)
        try:
            held = parse_hold(hold) if hold is not None else None
        except ValueError as error:
            raise page_error(str(error)) from error
        result, translation = one_translation(ui, 1, clean, model, device, None, None, max_length, None, None,
                                              text_field="clean")
        if len(result.translations) > 1:
            raise page_error(f"clean must be one sentence on one line; it has {len(result.translations)} lines")
        counted("target", target, len(translation.tgt_ids), " for this translation")
        if noise_word is not None:
            counted("noise_word", noise_word, len(translation.src_ids) - 1, " for this source")
            corrupted_translation = None
        else:
            other, corrupted_translation = one_translation(ui, 1, corrupted, model, device, None, None, max_length,
                                                           None, None, text_field="corrupted")
            if len(other.translations) > 1:
                raise page_error(f"corrupted must be one sentence on one line; it has {len(other.translations)} lines")
        tokenizer = ui.service.translator_of(result).tokenizer
        try:
            found = ui.service.patching(result, translation, corrupted or None, target, contrast, analyses,
                                        noise_word, noise_std)
            answer = {"clean": {"text": clean, "translation": translation.text,
                                "translation_pieces": translation.tgt_tokens},
                      "corrupted": {"text": corrupted, "translation": None if corrupted_translation is None else
                                    corrupted_translation.text},
                      **patching_json(found, lambda ids: [tokenizer.id_to_piece(i) for i in ids])}
            if held is not None:
                answer["held"] = {"cell": hold, "translation": ui.service.held_translation(
                    result, translation, corrupted or None, target, noise_word, noise_std, held)}
        except ValueError as error:
            raise page_error(str(error)) from error
        return answer

    return patch


__all__ = ["patch_endpoint"]
