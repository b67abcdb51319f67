import asyncio
import gc
import threading
import weakref

import numpy as np
import pytest
import torch

from transformer import Transformer, capture_attention, record

from .conftest import FLOAT32_ROUNDING, tiny_config


def run_all_at_once(task, n_threads: int, repeats: int = 1) -> list:
    """Runs task(i) in n_threads threads released together by a barrier; returns each thread's last result."""
    results, barrier = [None] * n_threads, threading.Barrier(n_threads)

    def worker(i):
        barrier.wait()
        for _ in range(repeats):
            results[i] = task(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def padded_batch():
    torch.manual_seed(1)
    src, tgt = torch.randint(1, 11, (3, 9)), torch.randint(1, 11, (3, 7))
    src[1, 6:] = 0
    tgt[2, 5:] = 0
    return src, tgt


def hooks_left(model):
    return sum(len(m._forward_hooks) for m in model.modules())


@pytest.fixture(params=["pre", "post"])
def model(request):
    torch.manual_seed(0)
    return Transformer(tiny_config(norm=request.param, final_norm=request.param == "pre")).eval()


def test_shapes(model):
    src, tgt = padded_batch()
    with capture_attention(model) as att:
        model(src, tgt)
    layers, heads = model.config.n_layers, model.config.n_heads
    assert att.encoder_self.shape == (layers, 3, heads, 9, 9)
    assert att.decoder_self.shape == (layers, 3, heads, 7, 7)
    assert att.cross.shape == (layers, 3, heads, 7, 9)


def test_rows_sum_to_one_causal_and_padding_zeros(model):
    src, tgt = padded_batch()
    with capture_attention(model) as att:
        model(src, tgt)
    for probs in (att.encoder_self, att.decoder_self, att.cross):  # float32 rows of <= 9 weights: a few ulps of sum
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]), atol=1e-5, rtol=0)
    above_diagonal = ~torch.ones(7, 7, dtype=torch.bool).tril()
    # exact zeros: a masked key's score is -inf and exp(-inf) is 0 whatever order the sums take
    assert att.decoder_self[..., above_diagonal].abs().max() == 0
    assert att.encoder_self[:, 1, :, :, 6:].abs().max() == 0  # padded source keys
    assert att.cross[:, 1, :, :, 6:].abs().max() == 0
    assert att.decoder_self[:, 2, :, :, 5:].abs().max() == 0  # padded target keys


def test_explicit_probabilities_match_an_independent_computation():
    torch.manual_seed(0)
    model = Transformer(tiny_config(n_layers=1)).eval()
    src = torch.randint(1, 11, (1, 5))
    with capture_attention(model) as att:
        model(src, torch.randint(1, 11, (1, 3)))
    layer, d, h = model.encoder_layers[0], model.config.d_model, model.config.n_heads
    x = layer.attention_residual.norm(model.src_embed(src) + model.positions.table[:5])
    weight, bias = layer.self_attention.in_proj.weight, layer.self_attention.in_proj.bias  # rows: q | k | v
    q = (x @ weight[:d].T + bias[:d]).view(5, h, d // h).transpose(0, 1)
    k = (x @ weight[d:2 * d].T + bias[d:2 * d]).view(5, h, d // h).transpose(0, 1)
    expected = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1)
    # other products than the model's (sliced weights, another matmul): float32 rounding on weights <= 1
    torch.testing.assert_close(att.encoder_self[0, 0], expected, atol=1e-5, rtol=0)


def test_logits_identical_with_and_without_capture_and_hooks_removed(model):
    src, tgt = padded_batch()
    plain = model(src, tgt)
    with capture_attention(model):
        captured = model(src, tgt)
    # fused (scaled_dot_product_attention) against explicit attention: torch sums in another order, float32 rounding
    # through two layers on logits of order 1
    torch.testing.assert_close(plain, captured, atol=1e-5, rtol=0)
    assert hooks_left(model) == 0
    assert torch.equal(model(src, tgt), plain)  # fused path again: the same ops on the same tensors, same thread


def test_hooks_removed_after_an_exception(model):
    src, tgt = padded_batch()
    with pytest.raises(RuntimeError, match="boom"):
        with capture_attention(model):
            model(src, tgt)
            raise RuntimeError("boom")
    assert hooks_left(model) == 0
    with capture_attention(model) as att:  # and capture still works afterwards
        model(src, tgt)
    assert att.cross.shape[0] == model.config.n_layers


def test_the_model_keeps_no_reference_to_what_was_recorded(model):
    src, tgt = padded_batch()
    with capture_attention(model) as att:
        model(src, tgt)
    recorded = [weakref.ref(t) for _, t in att.calls]
    assert len(recorded) == 3 * model.config.n_layers
    del att
    gc.collect()
    assert all(ref() is None for ref in recorded)  # nothing on the model (or anywhere else) still holds them


def test_layer_outputs_are_recorded_by_their_declared_probe(model):
    src, tgt = padded_batch()
    with record(model, ["encoder_hidden", "decoder_hidden"]) as rec:
        logits = model(src, tgt)
    assert rec["encoder_hidden"].shape == (model.config.n_layers, 3, 9, model.config.d_model)
    # the last decoder layer's output, through the final norm and the generator, gives the logits (the same products
    # run again outside the forward; 1e-5 on logits of order 1 covers float32 rounding should torch split them anew)
    torch.testing.assert_close(
        model.generator(model.decoder_norm(rec["decoder_hidden"][-1])), logits, atol=1e-5, rtol=0
    )
    with pytest.raises(ValueError, match="records nothing named 'nonsense'"):
        with record(model, ["nonsense"]):
            pass


def test_a_capture_in_an_asyncio_task_records_the_model_run_in_a_worker_thread():
    """The task opens the capture and hands the model call to a worker thread (with its context, as
    asyncio.to_thread does); two such tasks at once each get exactly their own attention."""
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    inputs = [(torch.randint(1, 11, (1, 4 + i)), torch.randint(1, 11, (1, 3 + i))) for i in range(2)]
    with torch.no_grad():
        alone = []
        for src, tgt in inputs:
            with capture_attention(model) as att:
                model(src, tgt)
            alone.append(att.cross)

    async def task(src, tgt, started):
        with capture_attention(model) as att:
            started.release()
            await asyncio.to_thread(torch.no_grad()(model), src, tgt)
        return att.cross

    async def both():
        started = asyncio.Semaphore(0)
        return await asyncio.gather(*(task(src, tgt, started) for src, tgt in inputs))

    # another thread may run torch's kernels with another OpenMP team size: float32 rounding on weights <= 1
    for got, want in zip(asyncio.run(both()), alone):
        assert got is not None
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_threads_each_get_their_own_attention():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    inputs = [(torch.randint(1, 11, (1, 4 + i)), torch.randint(1, 11, (1, 3 + i))) for i in range(8)]

    def run(src, tgt):
        with capture_attention(model) as att:
            model(src, tgt)
        return att.encoder_self.clone(), att.decoder_self.clone(), att.cross.clone()

    alone = [run(*pair) for pair in inputs]
    together = run_all_at_once(lambda i: run(*inputs[i]), len(inputs), repeats=5)
    for mine, reference in zip(together, alone):  # other threads: float32 rounding on weights <= 1 (as above)
        for a, b in zip(mine, reference):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_threads_translating_with_capture_get_their_own_attention(random_translator):
    sentences = [
        f"a {w} dog runs near the water ." for w in ("red", "big", "small", "blue", "wet", "old", "tall", "happy")
    ]
    alone = [random_translator.translate(s, capture=True, max_length=12) for s in sentences]
    together = run_all_at_once(lambda i: random_translator.translate(sentences[i], capture=True, max_length=12), 8)
    for mine, reference in zip(together, alone):
        assert mine.tgt_ids == reference.tgt_ids
        for kind in ("encoder_self", "decoder_self", "cross"):
            # other threads may run torch's kernels with another OpenMP team size than the test's: the same tokens,
            # weights within float32 rounding
            np.testing.assert_allclose(getattr(mine.attention, kind), getattr(reference.attention, kind),
                                       **FLOAT32_ROUNDING)
