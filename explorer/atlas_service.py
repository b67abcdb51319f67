"""The served models' corpus atlases, for the API and the Atlas tab: a model's atlas is the folder `atlas/` inside its
checkpoint folder (the shipped models carry theirs), opened on the first question about that model and checked
against its weights; nothing is built or read at start-up."""
from __future__ import annotations

import threading
from collections import OrderedDict

from transformer.atlas import Atlas
from transformer.atlas.query import sentence_vectors as vectors
from transformer.atlas.store import AtlasError
from transformer.unicode_text import TextError

from .request import RequestError, check_unicode, choice, split_lines
from .text import page_error

ATLAS_FOLDER = "atlas"  # inside a checkpoint folder
MAX_K = 100
_opened: dict = {}
_lock = threading.Lock()


def served_atlas(ui, model: str | None):
    """(served model, its Atlas), opened once per model; a model without one is answered with how to build it."""
    key = ui.registry.default_key if model is None else model
    try:
        choice("model", key, sorted(ui.registry.models),
               unknown=f"model: unknown model {key!r}; available: {sorted(ui.registry.models)}")
    except RequestError as error:
        raise page_error(str(error)) from None
    served = ui.registry.get(key)
    folder = served.translator.source / ATLAS_FOLDER
    with _lock:
        if folder not in _opened:
            if not folder.is_dir():
                raise page_error(f"model {key!r} has no atlas: build one with `python -m transformer.atlas build "
                                 f"{served.translator.source} CORPUS_DIR {folder}`")
            try:
                atlas = Atlas.open(folder)
                atlas.check_checkpoint(served.translator.source)
            except AtlasError as error:
                raise page_error(f"model {key!r}: {error}") from None
            _opened[folder] = atlas
    return served, _opened[folder]


def one_sentence(text) -> str:
    try:
        check_unicode("text", text)
        lines = split_lines(text)
    except RequestError as error:
        raise page_error(str(error)) from None
    if len(lines) != 1:
        raise page_error(f"text: the atlas explains one sentence at a time, got {len(lines)} lines")
    return lines[0]


def sentence_vectors(served, text: str):
    """The sentence's every token's vectors (its greedy translation, teacher-forced), the same for every question
    about it: the maps drawn, then each token clicked, each source of the API's calls. The last VECTORS_KEPT
    sentences' are kept, so a click after the first asks the index alone."""
    try:
        return _kept_vectors(served, text)
    except (AtlasError, TextError) as error:
        raise page_error(str(error)) from None


VECTORS_KEPT = 64
_kept: OrderedDict = OrderedDict()  # (the model's id, text) -> its SentenceVectors, the latest last
_kept_lock = threading.Lock()


def _kept_vectors(served, text: str):
    model, tokenizer = served.translator.model, served.translator.tokenizer
    key = (id(model), text)
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]
    made = vectors(model, tokenizer, text)  # outside the lock: two first questions at once both compute, alike
    with _kept_lock:
        _kept[key] = made
        while len(_kept) > VECTORS_KEPT:
            _kept.popitem(last=False)
    return made
