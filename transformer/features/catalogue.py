"""What every latent of a dictionary is, over one corpus, in one file beside the dictionary (`catalogue.npz`): each
latent's strongest contexts, its activation histogram and how often it fires, so a page or a CLI can show a latent
without gathering a corpus again.

    catalogue = build_catalogue(translator, saved, sources, targets)   # the corpus read once at the point
    save_catalogue(folder, catalogue); catalogue = load_catalogue(folder)
    catalogue.contexts(412)       # its strongest rows: sentence (an index into catalogue.sources), position, value
    catalogue.histogram(412)      # (bin edges from 0 to its largest value, counts of its non-zero activations)
    catalogue.label(412, pieces)  # its top contexts' most frequent pieces, no external model

The shipped dictionaries' catalogues read the Tatoeba sentences the checkpoint's atlas indexes
(checkpoints/<model>/atlas/sentences.parquet), the only corpus sentences the repository holds; the file keeps the
sentences its contexts name, so it stands alone. A decoder point's row i of a sentence is the position that
predicted its reference's piece i, as gather.py reads it.

Shapes: n latents, K contexts kept per latent, B histogram bins.
"""
from __future__ import annotations

import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .contexts import top_contexts
from .dictionary import DictionaryError, checked_setting
from .files import SavedDictionary, write_atomically
from .gather import gather_activations

CATALOGUE_FILE = "catalogue.npz"
ATLAS_SENTENCES = Path("atlas") / "sentences.parquet"  # in a checkpoint's folder: the pairs its atlas indexes
ARRAYS = ("sentence", "position", "activation", "piece", "histogram", "active", "sources", "targets", "about")


@dataclass(frozen=True)
class CatalogueContext:
    sentence: int  # an index into Catalogue.sources / targets
    position: int  # the row's position in that sentence, 0-based, on the point's side
    activation: float
    piece: int  # the row's piece id: the source's piece, or the reference piece a decoder row predicted


@dataclass
class Catalogue:
    sentence: np.ndarray  # (n, K) int32, -1 where a latent has fewer than K active rows
    position: np.ndarray  # (n, K) int32
    activation: np.ndarray  # (n, K) float32, strongest first
    piece: np.ndarray  # (n, K) int32
    histogram: np.ndarray  # (n, B) int64: non-zero activations in B equal bins from 0 to the latent's largest
    active: np.ndarray  # (n,) int64: rows where the latent is non-zero
    sources: list[str]  # the sentences the contexts name
    targets: list[str]  # their references ("" for an encoder point's catalogue read on sources alone)
    point: str
    side: str
    corpus: str
    tokens: int  # rows read

    @property
    def n(self) -> int:
        return len(self.active)

    def checked(self, latent) -> int:
        return checked_setting("latent", latent, int, 0, self.n - 1)

    def contexts(self, latent: int) -> list[CatalogueContext]:
        latent = self.checked(latent)
        return [CatalogueContext(int(s), int(p), float(a), int(i)) for s, p, a, i in
                zip(self.sentence[latent], self.position[latent], self.activation[latent], self.piece[latent])
                if s >= 0]

    def histogram_of(self, latent: int) -> tuple[np.ndarray, np.ndarray]:
        """(B + 1 edges, B counts): 0 to the latent's largest activation in equal bins."""
        latent = self.checked(latent)
        top = float(self.activation[latent, 0]) if self.sentence[latent, 0] >= 0 else 0.0
        return np.linspace(0.0, top, self.histogram.shape[1] + 1), self.histogram[latent]

    def label(self, latent: int, piece_of, words: int = 3) -> str:
        """Its top contexts' most frequent pieces (word marks dropped), most frequent first; `piece_of(id)` names a
        piece (the tokenizer's id_to_piece)."""
        counts = Counter(piece_of(c.piece).replace("▁", "") or piece_of(c.piece) for c in self.contexts(latent))
        return " / ".join(piece for piece, _ in counts.most_common(words))

    def latents_of_piece(self, piece_id: int, top: int = 10) -> list[tuple[int, float]]:
        """The latents whose kept contexts include `piece_id`, by their strongest activation on it: (latent,
        activation), strongest first."""
        hits = np.where(self.piece == piece_id, self.activation, 0.0).max(axis=1)
        order = np.lexsort((np.arange(self.n), -hits))[: checked_setting("top", top, int, 1)]
        return [(int(j), float(hits[j])) for j in order if hits[j] > 0]


@torch.no_grad()
def build_catalogue(translator, saved: SavedDictionary, sources: list[str], targets: list[str] | None, corpus: str,
                    per_latent: int = 8, bins: int = 12, batch_size: int = 4096, progress=None) -> Catalogue:
    """Every latent's `per_latent` strongest rows over the corpus (ties: the earlier row), its histogram in `bins`
    bins and its count of active rows. `progress(done, total)` hears each gathered batch of sentences."""
    per_latent = checked_setting("per_latent", per_latent, int, 1, 1000)
    bins = checked_setting("bins", bins, int, 1, 1000)
    dictionary = saved.dictionary
    gathered = gather_activations(translator, saved.origin.point, sources, targets, progress=progress)
    tops = top_contexts(dictionary, gathered.vectors, per_latent, batch_size)
    n = dictionary.config.n
    rows = np.full((n, per_latent), -1, dtype=np.int64)
    activation = np.zeros((n, per_latent), dtype=np.float32)
    for latent, found in tops.items():
        rows[latent, : len(found)] = [c.row for c in found]
        activation[latent, : len(found)] = [c.activation for c in found]
    top = torch.from_numpy(activation[:, 0]).double()
    histogram, active = torch.zeros(n * bins, dtype=torch.long), torch.zeros(n, dtype=torch.long)
    for start in range(0, len(gathered.vectors), batch_size):
        z = dictionary.encode(gathered.vectors[start : start + batch_size]).double()  # (rows, n)
        where = z > 0
        # bin b holds (b/B, (b+1)/B] of the latent's largest; the largest itself in the last bin
        index = torch.clamp(torch.ceil(z / top.clamp(min=1e-30) * bins).long() - 1, 0, bins - 1)
        latent = torch.arange(n).expand_as(z)
        histogram.index_add_(0, (latent * bins + index)[where], torch.ones(int(where.sum()), dtype=torch.long))
        active += where.sum(0)
    safe, sentence_of_row = np.maximum(rows, 0), gathered.sentences.numpy()
    used = np.unique(sentence_of_row[rows[rows >= 0]])  # the sentences some context names, renumbered from 0
    renumber = np.full(len(sources), -1)
    renumber[used] = np.arange(len(used))
    sentence = np.where(rows >= 0, renumber[sentence_of_row[safe]], -1)
    return Catalogue(
        sentence=sentence.astype(np.int32), position=np.where(rows >= 0, gathered.positions.numpy()[safe], 0)
        .astype(np.int32), activation=activation, piece=np.where(rows >= 0, gathered.token_ids.numpy()[safe], 0)
        .astype(np.int32), histogram=histogram.view(n, bins).numpy(), active=active.numpy(),
        sources=[sources[i] for i in used], targets=[targets[i] for i in used] if targets else [""] * len(used),
        point=gathered.point, side=gathered.side, corpus=corpus, tokens=len(gathered.vectors))


def save_catalogue(folder, catalogue: Catalogue) -> Path:
    path = Path(folder) / CATALOGUE_FILE
    about = np.array([catalogue.point, catalogue.side, catalogue.corpus, str(catalogue.tokens)])
    arrays = {name: getattr(catalogue, name) for name in ARRAYS[:6]}
    arrays |= {"sources": np.array(catalogue.sources, dtype=str), "targets": np.array(catalogue.targets, dtype=str),
               "about": about}

    def write(temporary: str) -> None:
        with open(temporary, "wb") as handle:
            np.savez_compressed(handle, **arrays)

    return write_atomically(path, write)


def load_catalogue(folder, n: int | None = None) -> Catalogue:
    """The folder's catalogue, checked (no pickles; every array present with consistent shapes; `n` latents when
    given); a problem is one DictionaryError naming the file."""
    path = Path(folder) / CATALOGUE_FILE
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in ARRAYS}
    except FileNotFoundError:
        raise DictionaryError(f"{path}: no catalogue; make one with `python -m transformer.features top "
                              f"{Path(folder)} --build`") from None
    except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise DictionaryError(f"{path}: not a readable catalogue ({error})") from None
    shape = arrays["sentence"].shape
    problems = [name for name in ARRAYS[1:4] if arrays[name].shape != shape]
    problems += [] if arrays["histogram"].ndim == 2 and len(arrays["histogram"]) == shape[0] else ["histogram"]
    problems += [] if arrays["active"].shape == shape[:1] else ["active"]
    problems += [] if len(arrays["sources"]) == len(arrays["targets"]) > arrays["sentence"].max(initial=-1) else [
        "sources"]
    problems += [] if n is None or shape[0] == n else [f"latents ({shape[0]}, the dictionary has {n})"]
    if len(shape) != 2 or problems or len(arrays["about"]) != 4:
        raise DictionaryError(f"{path}: inconsistent catalogue: {', '.join(problems) or 'about'}")
    point, side, corpus, tokens = (str(value) for value in arrays["about"])
    return Catalogue(arrays["sentence"], arrays["position"], arrays["activation"], arrays["piece"],
                     arrays["histogram"], arrays["active"], [str(s) for s in arrays["sources"]],
                     [str(t) for t in arrays["targets"]], point, side, corpus, int(tokens))


def atlas_pairs(checkpoint_folder) -> tuple[list[str], list[str], str]:
    """(sources, targets, corpus name): the pairs the checkpoint's atlas indexes, the shipped catalogues' corpus."""
    import pyarrow.parquet as parquet

    path = Path(checkpoint_folder or "") / ATLAS_SENTENCES
    if not path.is_file():
        raise DictionaryError(f"{path}: the checkpoint has no atlas sentences; give a corpus folder (--corpus)")
    table = parquet.read_table(path, columns=["source", "target"]).to_pydict()
    return table["source"], table["target"], f"{Path(checkpoint_folder).name}/{ATLAS_SENTENCES.as_posix()}"
