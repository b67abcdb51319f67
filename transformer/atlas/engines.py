"""Where the teacher-forced batches run: "local" (this process, nothing more to install) or "ray" (Ray Data's
`map_batches` over a class whose actors each load the model once; `pip install ".[atlas-cluster]"`).

`ray.init()` starts a local Ray on this machine, or joins the cluster that RAY_ADDRESS names. Both engines run the
same batches (corpus.batches) through the same function (extract.extract_batch), and the driver writes every
batch's result to the same rows, so their atlases hold the same numbers.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..checkpoint import load_checkpoint
from .extract import extract_batch
from .store import AtlasError

ENGINES = ("local", "ray")


def run_engine(settings, checkpoint: Path, model, corpus, batch_list: list[np.ndarray], sampled: dict,
               on_batch) -> None:
    """Runs every batch; `on_batch(out)` gets each one's extract.py dict (in any order)."""
    if settings.engine == "local":
        for sentences in batch_list:
            on_batch(extract_batch(model, corpus, sentences, sampled))
    else:
        run_ray(checkpoint, corpus, batch_list, sampled, settings.threads, on_batch)


def packed(out: dict) -> bytes:
    """An extract.py dict as .npz bytes (plain arrays, no pickles), one value per Ray row."""
    buffer = io.BytesIO()
    np.savez(buffer, **out)
    return buffer.getvalue()


def unpacked(data: bytes) -> dict:
    with np.load(io.BytesIO(data), allow_pickle=False) as stored:
        return {name: stored[name] for name in stored.files}


class BatchExtractor:
    """Ray Data's class-based UDF: the model is loaded once per actor, in `__init__`, then each call runs batches."""

    def __init__(self, checkpoint: str, corpus, batch_list: list[np.ndarray], sampled: dict, threads: int | None):
        import torch

        if threads:
            torch.set_num_threads(threads)
        self.model, _, _ = load_checkpoint(checkpoint)
        self.corpus, self.batch_list, self.sampled = corpus, batch_list, sampled

    def __call__(self, rows: dict) -> dict:
        payloads = [packed(extract_batch(self.model, self.corpus, self.batch_list[int(b)], self.sampled))
                    for b in rows["batch"]]
        return {"batch": rows["batch"], "payload": np.array(payloads, dtype=object)}


def ray_module():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise AtlasError('--engine ray needs Ray Data: pip install ".[atlas-cluster]"') from None
    return ray


def run_ray(checkpoint: Path, corpus, batch_list: list[np.ndarray], sampled: dict, threads: int | None,
            on_batch, actors: int = 1) -> None:
    """The batches as a Ray dataset of batch numbers, mapped by `actors` BatchExtractor actors of `threads` CPUs
    each; the driver receives each result as it completes."""
    ray = ray_module()
    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    dataset = ray.data.from_items([{"batch": i} for i in range(len(batch_list))])
    mapped = dataset.map_batches(
        BatchExtractor, batch_size=1, concurrency=actors, num_cpus=threads or 1,
        fn_constructor_kwargs={"checkpoint": str(checkpoint), "corpus": corpus, "batch_list": batch_list,
                               "sampled": sampled, "threads": threads})
    for row in mapped.iter_rows():
        on_batch(unpacked(row["payload"]))
