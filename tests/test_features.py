"""Sparse dictionary features (transformer/features/): the TopK autoencoder held against its formulas written out here
in numpy, its metrics against hand sums, training against a synthetic dictionary it must recover, a resumed run
against an uncut one, and every bad setting, point and file against the one error it must raise."""
import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from transformer.features import (
    DictionaryConfig,
    DictionaryError,
    Origin,
    SparseDictionary,
    Trainer,
    TrainingSettings,
    gather_activations,
    load_dictionary,
    measure,
    save_dictionary,
)
from transformer.features.files import CONFIG_FILE, WEIGHTS_FILE
from transformer.features.metrics import dead_latents, fraction_of_variance_unexplained, mean_active_latents
from transformer.features.training import aux_k_loss, remove_parallel_gradient

from .conftest import FLOAT32_ROUNDING

D, N_LATENTS, K = 16, 48, 5
# a sentence run in a padded batch against the same sentence alone: other matmul shapes sum in other orders
# (conftest's FLOAT32_ROUNDING), and a layer's output, of order 1 to 10, carries a few of its ulps (~1e-6) into
# features near 0, where a relative tolerance means nothing
BATCHED_AGAINST_ALONE = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture
def one_thread():
    """Exact equality of two training runs needs the same order of every sum: one thread (conftest's rounding note)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def dictionary_with_biases(seed: int = 0) -> SparseDictionary:
    """A dictionary whose biases are not zero, so the formulas' every term shows."""
    dictionary = SparseDictionary(DictionaryConfig(D, N_LATENTS, K, seed=seed))
    generator = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        dictionary.b_enc.copy_(torch.randn(N_LATENTS, generator=generator) * 0.3)
        dictionary.b_dec.copy_(torch.randn(D, generator=generator))
    return dictionary


def tokens(count: int, seed: int = 1) -> torch.Tensor:
    return torch.randn(count, D, generator=torch.Generator().manual_seed(seed)) + 0.5


def numpy_parameters(dictionary):
    return {name: getattr(dictionary, name).detach().numpy().astype(np.float64)
            for name in ("W_enc", "b_enc", "W_dec", "b_dec")}


def hand_codes(x: np.ndarray, p: dict, k: int) -> np.ndarray:
    """z by the formula, row by row: ReLU of (x - b_dec) W_enc + b_enc, its k largest kept, the rest 0."""
    codes = np.zeros((len(x), p["W_enc"].shape[1]))
    for row, token in enumerate(x):
        pre = np.maximum((token - p["b_dec"]) @ p["W_enc"] + p["b_enc"], 0.0)
        largest = np.argsort(-pre, kind="stable")[:k]
        codes[row, largest] = pre[largest]
    return codes


# ---- the autoencoder


def test_encode_and_decode_are_the_formulas():
    dictionary, x = dictionary_with_biases(), tokens(32)
    p = numpy_parameters(dictionary)
    codes = hand_codes(x.numpy().astype(np.float64), p, K)
    with torch.no_grad():
        z = dictionary.encode(x)
        np.testing.assert_allclose(z.numpy(), codes, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dictionary.decode(z).numpy(), z.numpy() @ p["W_dec"] + p["b_dec"], rtol=1e-5,
                                   atol=1e-5)
        result = dictionary(x)
        assert torch.equal(result.z, z) and torch.equal(result.reconstruction, dictionary.decode(z))


def test_each_code_keeps_exactly_the_k_largest_pre_activations_after_relu():
    dictionary, x = dictionary_with_biases(), tokens(64)
    with torch.no_grad():
        dictionary.b_enc += 10.0  # every pre-activation positive, so each row has k non-zeros to keep
        z = dictionary.encode(x)
        after_relu = ((x - dictionary.b_dec) @ dictionary.W_enc + dictionary.b_enc).relu()
    assert ((z != 0).sum(1) == K).all()
    for row in range(len(x)):
        kept = set(torch.nonzero(z[row]).flatten().tolist())
        assert kept == set(np.argsort(-after_relu[row].numpy(), kind="stable")[:K].tolist())
        assert min(after_relu[row, list(kept)]) >= max(np.delete(after_relu[row].numpy(), list(kept)))


def test_a_code_has_fewer_than_k_non_zeros_where_fewer_pre_activations_are_positive():
    dictionary, x = dictionary_with_biases(), tokens(8)
    with torch.no_grad():
        dictionary.b_enc.fill_(-100.0)
        dictionary.b_enc[:2] = 100.0  # only two latents can be positive
        z = dictionary.encode(x)
    assert ((z != 0).sum(1) == 2).all() and (z >= 0).all()


def test_without_its_active_latents_a_token_decodes_to_b_dec_and_each_latent_adds_its_row():
    """With every active latent of a token set to 0, decode gives exactly b_dec (0 · W_dec adds exact zeros). The
    reconstruction error x - x̂ is x - b_dec - sum over the active latents j of z_j W_dec[j], and x̂ = b_dec + that sum:
    each active latent adds z_j times its decoder row and nothing else does."""
    dictionary, x = dictionary_with_biases(), tokens(16)
    with torch.no_grad():
        z = dictionary.encode(x)
        emptied = z.clone()
        emptied[z != 0] = 0.0
        assert torch.equal(dictionary.decode(emptied), dictionary.b_dec.expand(len(x), D))
        reconstruction = dictionary.decode(z)
        for row in range(len(x)):
            active = torch.nonzero(z[row]).flatten().tolist()
            assert len(active) == K
            by_hand = dictionary.b_dec.clone()
            for latent in active:
                by_hand += z[row, latent] * dictionary.W_dec[latent]
            torch.testing.assert_close(reconstruction[row], by_hand, **FLOAT32_ROUNDING)
            torch.testing.assert_close(x[row] - reconstruction[row], x[row] - by_hand, **FLOAT32_ROUNDING)


def test_the_decoder_starts_as_the_encoders_transpose_with_unit_rows_and_the_seed_draws_it():
    one, same, other = (SparseDictionary(DictionaryConfig(D, N_LATENTS, K, seed=s)) for s in (3, 3, 4))
    assert torch.equal(one.W_dec, one.W_enc.T)
    torch.testing.assert_close(one.W_dec.norm(dim=1), torch.ones(N_LATENTS))
    assert torch.equal(one.W_dec, same.W_dec) and not torch.equal(one.W_dec, other.W_dec)
    assert set(one.state_dict()) == {"W_enc", "b_enc", "W_dec", "b_dec"}
    assert all(tensor.dtype == torch.float32 for tensor in one.state_dict().values())


@pytest.mark.parametrize("settings, named", [
    (dict(d_model=8, n=4, k=5), "k must be at most n"), (dict(d_model=8, n=4, k=0), "k must be"),
    (dict(d_model=8, n=0, k=1), "n must be"), (dict(d_model=0, n=4, k=1), "d_model must be"),
    (dict(d_model=8, n=4, k=1.5), "k must be an integer"), (dict(d_model=8, n=4, k=True), "k must be"),
    (dict(d_model=8, n=4, k=2, seed=-1), "seed must be"),
])
def test_a_bad_setting_is_refused_up_front_naming_it(settings, named):
    with pytest.raises(DictionaryError, match=named):
        DictionaryConfig(**settings)


def test_a_bad_input_or_training_setting_is_named():
    dictionary = dictionary_with_biases()
    with pytest.raises(DictionaryError, match=r"x must be a tensor of shape \(\.\.\., d_model=16\), got shape \(3, 7"):
        dictionary.encode(torch.zeros(3, 7))
    with pytest.raises(DictionaryError, match="unknown setting 'layer'"):
        DictionaryConfig.from_dict({"d_model": 8, "n": 4, "k": 2, "layer": 3})
    for setting in ("epochs", "batch_size", "learning_rate", "aux_k", "dead_tokens"):
        with pytest.raises(DictionaryError, match=f"{setting} must be"):
            TrainingSettings(**{setting: 0})
    with pytest.raises(DictionaryError, match="activations must be a"):
        Trainer(torch.zeros(10, 3), DictionaryConfig(D, N_LATENTS, K))


# ---- metrics


def test_the_metrics_are_the_hand_sums():
    x, reconstruction = tokens(12, seed=5), tokens(12, seed=6)
    xs, rs = x.double().numpy(), reconstruction.double().numpy()
    mean = [sum(xs[i][j] for i in range(12)) / 12 for j in range(D)]
    error = sum((xs[i][j] - rs[i][j]) ** 2 for i in range(12) for j in range(D))
    spread = sum((xs[i][j] - mean[j]) ** 2 for i in range(12) for j in range(D))
    assert fraction_of_variance_unexplained(x, reconstruction) == pytest.approx(error / spread, rel=1e-12)
    assert fraction_of_variance_unexplained(x, x) == 0.0
    assert fraction_of_variance_unexplained(x, x.mean(0).expand_as(x)) == pytest.approx(1.0, rel=1e-6)
    z = torch.tensor([[0.0, 2.0, 0.0, 1.0], [0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 3.0]])
    assert dead_latents(z) == 2  # latents 0 and 2 never fire
    assert mean_active_latents(z) == pytest.approx((2 + 1 + 1) / 3)


def test_measure_in_batches_is_the_metrics_of_the_whole():
    dictionary, x = dictionary_with_biases(), tokens(100)
    with torch.no_grad():
        whole = dictionary(x)
    metrics = measure(dictionary, x, batch_size=7)
    assert metrics.tokens == 100
    assert metrics.fvu == pytest.approx(fraction_of_variance_unexplained(x, whole.reconstruction), rel=1e-6)
    assert metrics.dead_latents == dead_latents(whole.z)
    assert metrics.mean_active_latents == pytest.approx(mean_active_latents(whole.z))


# ---- training


def sparse_data(count: int = 4096, width: int = 64, directions: int = 128, active: int = 4, seed: int = 7):
    """Tokens made of `active` of `directions` random unit directions each, at lengths 0.5 to 1.5, plus an offset."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randn(directions, width, generator=generator)
    rows /= rows.norm(dim=1, keepdim=True)
    chosen = torch.rand(count, directions, generator=generator).argsort(1)[:, :active]
    lengths = torch.rand(count, active, generator=generator) + 0.5
    return torch.zeros(count, directions).scatter(1, chosen, lengths) @ rows + 0.3


def test_training_recovers_a_synthetic_sparse_dictionary(one_thread):
    x = sparse_data()
    trainer = Trainer(x, DictionaryConfig(64, 128, 4, seed=0), TrainingSettings(epochs=15, batch_size=128,
                                                                                learning_rate=3e-3))
    torch.testing.assert_close(trainer.dictionary.b_dec.detach(), x.mean(0))  # b_dec starts at the mean token
    heard = []
    dictionary = trainer.train(progress=heard.append)
    assert len(heard) == 15 * 32 and (heard[-1].epoch, heard[-1].step) == (15, 32)
    metrics = measure(dictionary, x)
    assert metrics.fvu < 0.2, metrics
    assert metrics.mean_active_latents == 4.0
    torch.testing.assert_close(dictionary.W_dec.detach().norm(dim=1), torch.ones(128))


def test_the_decoder_gradient_loses_its_part_along_each_row():
    dictionary = dictionary_with_biases()
    dictionary(tokens(20)).reconstruction.pow(2).sum().backward()
    before = dictionary.W_dec.grad.clone().double().numpy()
    remove_parallel_gradient(dictionary)
    rows, after = dictionary.W_dec.detach().double().numpy(), dictionary.W_dec.grad.double().numpy()
    for latent in range(N_LATENTS):
        along = float(np.dot(before[latent], rows[latent]))
        np.testing.assert_allclose(after[latent], before[latent] - along * rows[latent], rtol=1e-5, atol=1e-6)
        # float32 rounding of the subtraction leaves a few ulps of the gradient's size along the row
        assert abs(np.dot(after[latent], rows[latent])) <= 1e-6 * np.linalg.norm(before[latent])


def test_aux_k_reconstructs_the_error_with_the_largest_dead_latents():
    dictionary, x = dictionary_with_biases(), tokens(10)
    dead = torch.zeros(N_LATENTS, dtype=torch.bool)
    dead[::3] = True  # 16 dead latents, of which AuxK takes 4
    with torch.no_grad():
        result = dictionary(x)
        loss = float(aux_k_loss(dictionary, result, x, dead, aux_k=4))
    p = numpy_parameters(dictionary)
    error = x.double().numpy() - result.reconstruction.double().numpy()
    pre = result.pre_activations.double().numpy()
    estimate = np.zeros_like(error)
    for row in range(len(x)):
        dead_ids = np.flatnonzero(dead.numpy())
        largest = dead_ids[np.argsort(-pre[row, dead_ids], kind="stable")[:4]]
        estimate[row] = np.maximum(pre[row, largest], 0) @ p["W_dec"][largest]
    expected = ((error - estimate) ** 2).sum() / ((error - error.mean(0)) ** 2).sum()
    assert loss == pytest.approx(expected, rel=1e-5)


SMALL = dict(config=DictionaryConfig(64, 128, 4, seed=2),
             settings=TrainingSettings(epochs=2, batch_size=128, learning_rate=3e-3, dead_tokens=128))


def assert_same_parameters(one: SparseDictionary, other: SparseDictionary) -> None:
    for name, tensor in one.state_dict().items():
        assert torch.equal(tensor, other.state_dict()[name]), name


def test_a_seed_gives_the_same_run_on_one_thread(one_thread):
    x = sparse_data(1000)
    first = Trainer(x, **SMALL).train()
    assert_same_parameters(first, Trainer(x, **SMALL).train())
    other = Trainer(x, DictionaryConfig(64, 128, 4, seed=3), SMALL["settings"]).train()
    assert not torch.equal(first.W_dec, other.W_dec)


class Cut(Exception):
    """A run stopped from outside (a killed process) right after its state was saved."""


@pytest.mark.parametrize("cut", [(1, 8), (2, 3)], ids=["after-epoch-1", "mid-epoch-2"])
def test_a_resumed_run_ends_where_an_uncut_one_does(one_thread, tmp_path, cut):
    """2 epochs straight against the same run cut after a step (its state saved, the trainer dropped), resumed from
    the file and trained to the end: identical parameters. The dead latents' counts are part of the state: AuxK runs."""
    x = sparse_data(1000)  # 8 batches an epoch
    heard = []
    straight = Trainer(x, **SMALL).train(progress=heard.append)
    assert any(progress.dead_latents for progress in heard)
    cut_run, path = Trainer(x, **SMALL), tmp_path / "state.pt"

    def stop_at(progress):
        if (progress.epoch, progress.step) == cut:
            cut_run.save_state(path)
            raise Cut

    with pytest.raises(Cut):
        cut_run.train(progress=stop_at)
    resumed = Trainer.resume(path, x)
    assert (resumed.epoch, resumed.step) == (cut[0] - 1, cut[1])
    assert_same_parameters(straight, resumed.train())


def test_a_state_is_resumed_only_over_its_own_activations(tmp_path):
    x = sparse_data(300)
    path = Trainer(x, **SMALL).save_state(tmp_path / "state.pt")
    with pytest.raises(DictionaryError, match="not the ones the run was trained on"):
        Trainer.resume(path, sparse_data(300, seed=8))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DictionaryError, match=r"state\.pt: truncated or not a training state"):
        Trainer.resume(path, x)


# ---- files


def origin() -> Origin:
    return Origin(point="encoder_layers.1.output", model="tiny", corpus="synthetic", sentences=12)


@pytest.fixture
def saved(tmp_path):
    return save_dictionary(tmp_path / "dictionary", dictionary_with_biases(), origin(), {"fvu": 0.25})


def test_a_saved_dictionary_holds_exactly_its_four_tensors_and_loads_back(saved):
    tensors = load_file(saved / WEIGHTS_FILE)
    assert set(tensors) == {"W_enc", "b_enc", "W_dec", "b_dec"}
    assert all(tensor.dtype == torch.float32 for tensor in tensors.values())
    config = json.loads((saved / CONFIG_FILE).read_text())
    assert config == {"point": "encoder_layers.1.output", "model": "tiny", "corpus": "synthetic", "sentences": 12,
                      "d_model": D, "n": N_LATENTS, "k": K, "seed": 0, "metrics": {"fvu": 0.25}}
    loaded = load_dictionary(saved)
    assert loaded.origin == origin() and loaded.metrics == {"fvu": 0.25}
    assert_same_parameters(loaded.dictionary, dictionary_with_biases())


def rewrite_tensors(folder, change) -> None:
    tensors = load_file(folder / WEIGHTS_FILE)
    change(tensors)
    save_file(tensors, folder / WEIGHTS_FILE)


def rewrite_config(folder, change) -> None:
    config = json.loads((folder / CONFIG_FILE).read_text())
    change(config)
    (folder / CONFIG_FILE).write_text(json.dumps(config))


DAMAGE = {
    "truncated weights": (lambda f: (f / WEIGHTS_FILE).write_bytes((f / WEIGHTS_FILE).read_bytes()[:300]),
                          WEIGHTS_FILE, "truncated or not a safetensors file"),
    "not safetensors": (lambda f: (f / WEIGHTS_FILE).write_text("hello"), WEIGHTS_FILE, "not a safetensors file"),
    "missing weights": (lambda f: (f / WEIGHTS_FILE).unlink(), WEIGHTS_FILE, "file is missing"),
    "wrong tensor name": (lambda f: rewrite_tensors(f, lambda t: t.update(W_encoder=t.pop("W_enc"))), WEIGHTS_FILE,
                          r"missing \['W_enc'\]; unexpected \['W_encoder'\]"),
    "extra tensor": (lambda f: rewrite_tensors(f, lambda t: t.update(scale=torch.ones(1))), WEIGHTS_FILE,
                     r"unexpected \['scale'\]"),
    "wrong shape": (lambda f: rewrite_tensors(f, lambda t: t.update(W_dec=t["W_dec"].T.contiguous())), WEIGHTS_FILE,
                    r"W_dec has shape \(16, 48\); .* make it \(48, 16\)"),
    "wrong dtype": (lambda f: rewrite_tensors(f, lambda t: t.update(b_enc=t["b_enc"].double())), WEIGHTS_FILE,
                    "b_enc is torch.float64, not float32"),
    "not finite": (lambda f: rewrite_tensors(f, lambda t: t["b_dec"].__setitem__(0, float("nan"))), WEIGHTS_FILE,
                   "b_dec holds NaN"),
    "k above n": (lambda f: rewrite_config(f, lambda c: c.update(k=N_LATENTS + 1)), CONFIG_FILE,
                  "k must be at most n"),
    "unknown key": (lambda f: rewrite_config(f, lambda c: c.update(layer=3)), CONFIG_FILE, "unknown setting 'layer'"),
    "point not text": (lambda f: rewrite_config(f, lambda c: c.update(point=3)), CONFIG_FILE,
                       "point must be a string"),
    "corrupt json": (lambda f: (f / CONFIG_FILE).write_text('{"point": '), CONFIG_FILE, "not valid JSON"),
    "missing config": (lambda f: (f / CONFIG_FILE).unlink(), CONFIG_FILE, "file is missing"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_dictionary_is_one_line_naming_the_file_and_the_fault(saved, damage):
    change, file, fault = DAMAGE[damage]
    change(saved)
    with pytest.raises(DictionaryError, match=fault) as info:
        load_dictionary(saved)
    message = str(info.value)
    assert message.startswith(str(saved / file) + ":") and "\n" not in message
    assert info.value.__cause__ is None and (info.value.__context__ is None or info.value.__suppress_context__)


# ---- gathering a point's vectors


@pytest.fixture(scope="module")
def pairs(corpus_dir):
    sources = (corpus_dir / "train.en").read_text().splitlines()[:7]
    return sources, (corpus_dir / "train.de").read_text().splitlines()[:7]


def hooked_output(module, run) -> torch.Tensor:
    """`module`'s output in `run()`, caught by a plain forward hook: independent of the probes."""
    caught = []
    handle = module.register_forward_hook(lambda m, inputs, output: caught.append(output))
    try:
        with torch.no_grad():
            run()
    finally:
        handle.remove()
    return caught[0][0]  # the one sentence's (positions, D)


def test_an_encoder_points_rows_are_each_sources_real_tokens(random_translator, pairs):
    model, tokenizer = random_translator.model, random_translator.tokenizer
    gathered = gather_activations(random_translator, "encoder_layers.1.output", pairs[0], batch_size=3)
    assert gathered.side == "source" and gathered.point == "encoder_layers.1.output"
    start = 0
    for index, text in enumerate(pairs[0]):
        ids = torch.tensor([tokenizer.encode(text) + [tokenizer.eos_id]])  # alone: no padding at all
        alone = hooked_output(model.encoder_layers[1], lambda: model.encode(ids))
        rows = slice(start, start + ids.shape[1])
        torch.testing.assert_close(gathered.vectors[rows], alone, **BATCHED_AGAINST_ALONE)
        assert (gathered.sentences[rows] == index).all()
        assert gathered.positions[rows].tolist() == list(range(ids.shape[1]))
        start += ids.shape[1]
    assert start == len(gathered.vectors)


def test_a_decoder_points_rows_are_teacher_forced_on_the_reference(random_translator, pairs):
    model, tokenizer = random_translator.model, random_translator.tokenizer
    gathered = gather_activations(random_translator, "decoder_layers.2.output", *pairs, batch_size=4)
    assert gathered.side == "target"
    start = 0
    for source, target in zip(*pairs):
        src = torch.tensor([tokenizer.encode(source) + [tokenizer.eos_id]])
        reference = tokenizer.encode(target) + [tokenizer.eos_id]
        tgt = torch.tensor([[model.config.decoder_start_id] + reference[:-1]])
        alone = hooked_output(model.decoder_layers[2], lambda: model(src, tgt))
        torch.testing.assert_close(gathered.vectors[start : start + len(reference)], alone,
                                   **BATCHED_AGAINST_ALONE)
        start += len(reference)
    assert start == len(gathered.vectors)


@pytest.mark.parametrize("point, targets, fault", [
    ("encoder_layers.9.output", None, r"records nothing named 'encoder_layers\.9\.output'.*The layer outputs: "
                                      r"encoder_layers\.0\.output, .*decoder_layers\.2\.output"),
    ("encoder.output", None, r"names 3 points"),
    ("encoder_layers.0.self_attention.weights", None, "not one vector per token"),
    ("decoder_layers.0.output", None, "give targets"),
    (["encoder_layers.0.output"], None, "point must be a string"),
])
def test_a_point_that_gives_no_token_vectors_is_refused_naming_it(random_translator, pairs, point, targets, fault):
    with pytest.raises(DictionaryError, match=fault):
        gather_activations(random_translator, point, pairs[0], targets)


def test_gathered_tokens_train_save_and_load_into_the_same_codes(random_translator, pairs, tmp_path, one_thread):
    gathered = gather_activations(random_translator, "encoder_layers.2.output", pairs[0])
    config = DictionaryConfig(gathered.vectors.shape[1], 64, 4, seed=1)
    dictionary = Trainer(gathered.vectors, config, TrainingSettings(epochs=2, batch_size=32)).train()
    metrics = measure(dictionary, gathered.vectors)
    folder = save_dictionary(tmp_path / "dictionary", dictionary, Origin(gathered.point, "random", "synthetic", 7),
                             metrics.to_dict())
    loaded = load_dictionary(folder)
    assert loaded.metrics == metrics.to_dict() and loaded.origin.point == "encoder_layers.2.output"
    with torch.no_grad():
        assert torch.equal(loaded.dictionary.encode(gathered.vectors), dictionary.encode(gathered.vectors))
