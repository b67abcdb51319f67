import functools
import importlib.util
import random
from pathlib import Path

import pytest
import torch

from transformer import ModelConfig, Tokenizer, Transformer, Translator
from transformer.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parent.parent
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
SHIPPED = ROOT / "checkpoints" / "en-de"


@functools.cache
def script(name: str):
    """scripts/NAME.py as a module, for the tests of what it reads and writes."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def shipped() -> Translator:
    """The shipped en-de model, loaded once per test process: the browser tests' reference for what the page shows
    (only translated with, never changed)."""
    return Translator.from_pretrained(SHIPPED)


def draw_packages():
    """scripts/draw_packages.py as a module: its import reader serves the layering tests too."""
    return script("draw_packages")


# Floats that torch's own kernels computed along two routes (another process, another thread or thread count, a
# batch against one sentence, fused against explicit attention) agree only to rounding: MKL/oneDNN matmuls, softmax
# and reductions may split and reorder a float32 sum by thread count and CPU (Intel or AMD, AVX2 or AVX-512), and
# each reordering moves a result by a few ulps (2**-23 ~ 1.2e-7 relative). Carried through a tiny model's two or
# three layers, a softmax and a log, that stays near 1e-6 relative: rtol=1e-5 leaves a tenfold margin and still
# fails on any real change; atol=1e-6 serves numbers near 0 (a masked key's weight), where relative error means
# nothing. Exact equality stays where our code fixes the order of every sum (the float16 kernel), or where the same
# function runs on the same tensors in the same thread.
FLOAT32_ROUNDING = dict(rtol=1e-5, atol=1e-6)
# The API and the exports round weights to 6 decimals (transformer/decoding/export.py): two values within
# FLOAT32_ROUNDING may round to neighbouring multiples of 1e-6, one more 1e-6 of absolute slack.
ROUNDED_TO_6 = dict(rtol=1e-5, atol=2e-6)


def assert_json_close(got, want, rtol: float, atol: float, where: str = "") -> None:
    """Two JSON-like trees (dicts, lists, tuples) equal in every key, string, int, bool and None, and in every float
    within atol + rtol * |want|: for numbers that crossed a process boundary or another route through torch."""
    if isinstance(want, float) or isinstance(got, float):
        assert isinstance(got, (int, float)) and isinstance(want, (int, float)), f"{where}: {got!r} != {want!r}"
        assert abs(got - want) <= atol + rtol * abs(want), f"{where}: {got!r} != {want!r}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), f"{where}: keys {got!r} != {want!r}"
        for key in want:
            assert_json_close(got[key], want[key], rtol, atol, f"{where}.{key}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{where}: {got!r} != {want!r}"
        for index, (a, b) in enumerate(zip(got, want)):
            assert_json_close(a, b, rtol, atol, f"{where}[{index}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


WORDS = ("a man woman dog child rides runs sits on the in with red blue big small street park ball bike "
         "water near two girl boy plays jumps").split()
GERMAN = dict(zip(WORDS, ("ein mann frau hund kind fährt läuft sitzt auf der im mit rot blau groß klein straße park "
                          "ball fahrrad wasser nahe zwei mädchen junge spielt springt").split()))


def synthetic_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """A toy 'translation' task: word-by-word substitution, learnable in seconds."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 8))]
        pairs.append((" ".join(words) + " .", " ".join(GERMAN[w] for w in words) + " ."))
    return pairs


def write_corpus(folder: Path, sizes=(("train", 600), ("val", 40), ("test_2016_flickr", 20))) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for seed, (split, n) in enumerate(sizes):
        pairs = synthetic_pairs(n, seed)
        (folder / f"{split}.en").write_text("\n".join(s for s, _ in pairs) + "\n")
        (folder / f"{split}.de").write_text("\n".join(t for _, t in pairs) + "\n")
    return folder


@pytest.fixture(scope="session", autouse=True)
def half_weight_kernel():
    """The float16-weight kernel, compiled here once before any test starts an app in a subprocess: a server
    stopped mid-compile would leave torch's build lock behind. Decoding is correct with or without it."""
    from transformer.core.half_linear import KERNEL

    return KERNEL.wait(timeout=600)


@pytest.fixture(scope="module")
def kernel():
    """The compiled float16 kernel, for tests of it; they skip where it cannot exist (no AVX2: F.linear runs)."""
    from transformer.core.half_linear import KERNEL

    if torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512"):
        pytest.skip("the kernel needs AVX2; F.linear is used instead")
    module = KERNEL.wait(timeout=600)
    assert module is not None, KERNEL.status
    return module


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory) -> Path:
    return write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def tokenizer_file(corpus_dir, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("spm") / "spm.model"
    Tokenizer.train([corpus_dir / "train.en", corpus_dir / "train.de"], path, vocab_size=300)
    return path


def tiny_config(vocab_size: int = 11, **overrides) -> ModelConfig:
    values = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=16, n_heads=4, n_layers=2, d_ff=32,
                  dropout=0.0, max_len=64, norm="pre", final_norm=True, pos_encoding="sinusoidal", pad_id=0)
    values.update(overrides)
    return ModelConfig(**values)


@pytest.fixture(scope="session")
def random_translator(tokenizer_file, tmp_path_factory) -> Translator:
    """An untrained model over the synthetic tokenizer, saved and loaded like a shipped checkpoint."""
    torch.manual_seed(0)
    vocab = Tokenizer.load(tokenizer_file).vocab_size
    model = Transformer(tiny_config(vocab, share_embeddings=True, tie_output=True, d_model=32, n_layers=3))
    folder = save_checkpoint(tmp_path_factory.mktemp("random-ckpt"), model, tokenizer_file)
    return Translator.from_pretrained(folder)


def recorded(translator: Translator) -> dict:
    """The strategy and settings a checkpoint's metrics.json records (the app's and evaluate's default decoding),
    as keyword arguments for Translator.translate."""
    strategy, settings = translator.recorded_decoding()
    return {"strategy": strategy, **settings}


@pytest.fixture(scope="module")
def json_api():
    """(the page's wiring, a client of its JSON routes) on the shipped models, without Gradio's server."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from explorer.http_api import add_json_routes
    from explorer.registry import discover
    from explorer.ui_state import Wiring

    ui = Wiring(discover(ROOT / "checkpoints"), [])
    app = FastAPI(docs_url=None, redoc_url=None)  # as Gradio makes its app: the routes' /docs is the project's
    add_json_routes(app, ui)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield ui, client
