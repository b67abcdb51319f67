"""`--engine ray` (Ray Data map_batches, one model per actor, a local Ray here) builds the same atlas as the local
engine: the same records and vectors, and neighbours at equal distances."""
import json

import numpy as np
import pytest

from transformer.atlas import Atlas, BuildSettings, build_atlas
from transformer.atlas.cli import main
from transformer.atlas.store import SIDES

from .atlas_fixtures import tiny_checkpoint

pytestmark = pytest.mark.slow  # starts a local Ray (a few seconds, several processes)


def test_local_and_ray_builds_agree(tmp_path, corpus_dir, tokenizer_file, capsys):
    pytest.importorskip("ray.data")
    import ray

    checkpoint = tiny_checkpoint(tmp_path / "checkpoint", tokenizer_file)
    atlases = {}
    try:
        for engine in ("local", "ray"):
            settings = BuildSettings(sentences=24, batch_size=4, sample=100, projection="pca", engine=engine,
                                     threads=1)
            build_atlas(checkpoint, corpus_dir, tmp_path / engine, settings)
            atlases[engine] = Atlas.open(tmp_path / engine)
    finally:
        ray.shutdown()
    local, distributed = atlases["local"], atlases["ray"]
    assert distributed.manifest["versions"]["ray"] and distributed.manifest["settings"]["engine"] == "ray"
    for side in SIDES:
        assert local.records(side).equals(distributed.records(side))
        for layer in range(local.stack(side).layers):
            # the same batches through the same function in another process (Ray's workers run their own torch
            # thread count): float32 results a few ulps apart may round to neighbouring float16 values, 2**-10 apart
            np.testing.assert_allclose(np.asarray(local.vectors(side, layer), np.float32),
                                       np.asarray(distributed.vectors(side, layer), np.float32), rtol=2**-10, atol=1e-6)
    answers = []
    for engine in ("local", "ray"):
        main(["neighbours", str(tmp_path / engine), "--sentence", "a red ball .", "--token", "2", "--layer", "2",
              "--k", "5"])
        answers.append(json.loads(capsys.readouterr().out)["neighbours"])
    assert [n["distance"] for n in answers[0]] == [n["distance"] for n in answers[1]]
