import random
from pathlib import Path

import pytest
import torch

from transformer import ModelConfig, Tokenizer, Transformer, Translator
from transformer.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parent.parent
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
SHIPPED = ROOT / "checkpoints" / "en-de"

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
