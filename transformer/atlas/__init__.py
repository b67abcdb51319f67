"""The corpus atlas: what every head does across thousands of sentences, and which corpus tokens a token resembles.

    python -m transformer.atlas build CHECKPOINT CORPUS_DIR OUT        # Parquet records, FAISS indexes, head maps
    python -m transformer.atlas neighbours OUT --sentence "A dog runs." --token 2 --layer 3 --side source --k 10

corpus.py tokenizes the pairs and plans the rows; extract.py runs one teacher-forced batch through the probes;
engines.py runs the batches here or on Ray; writer.py and store.py lay out the folder; index.py is the nearest-
neighbour index; maps.py the AttentionViz maps; build.py puts them together; reader.py and query.py answer
questions; cli.py is the command line. Needs the `atlas` extra (pyarrow, faiss-cpu, openTSNE), which nothing
else in the package imports.
"""
from .build import BuildSettings, build_atlas
from .reader import Atlas
from .store import AtlasError

__all__ = ["Atlas", "AtlasError", "BuildSettings", "build_atlas"]
