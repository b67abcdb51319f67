"""Every decoder layer's step in one kernel call (core/fused_step.py) against the Python step it replaces: the
same logits, recordings and translations, rows moved as beam search moves them, and the Python step wherever the
kernel would not compute the same."""
import pytest
import torch

from transformer import Transformer
from transformer.core.capture import record
from transformer.core.fused_step import FusedStep, pack, why_not_fused
from transformer.core.half_linear import MAX_ROWS
from transformer.core.head_mask import heads_masked
from transformer.core.probes import ATTENTION_KINDS
from transformer.decoding.step_decoder import StepDecoder, encode_batch
from transformer.decoding.strategies.beam import beam_search
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy

from .conftest import tiny_config

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel")]  # the kernel fixture: tests/conftest.py
STEP_PROBES = (*ATTENTION_KINDS, "decoder_hidden")
# widths below, across and beyond the kernel's 16- and 32-wide loops (with their scalar tails); learned positions;
# separate and shared, tied embeddings; stacks of unequal shapes
SHAPES = {
    "tiny": {},
    "width 48, learned positions": dict(d_model=48, n_heads=4, d_ff=80, pos_encoding="learned", share_embeddings=False),
    "width 64, tied": dict(d_model=64, n_heads=2, d_ff=128, share_embeddings=True, tie_output=True),
    # each stack its own shape: the kernel runs the decoder's (3 layers of 2 heads, feed-forward 24)
    "deep encoder, shallow decoder": dict(encoder_layers=4, encoder_heads=4, encoder_ff=48, decoder_layers=3,
                                          decoder_heads=2, decoder_ff=24),
}


def shipped_like(vocab_size: int = 37, **overrides) -> Transformer:
    """A tiny pre-norm model whose weights float16 holds exactly, as a shipped checkpoint loads, with the float16
    copies attached; its vocabulary is wide enough that the output projection runs the 16-wide loop and its tail."""
    torch.manual_seed(0)
    model = Transformer(tiny_config(vocab_size=vocab_size, **overrides)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(parameter.half().float())
        for name, parameter in model.named_parameters():  # norms and biases away from their 1 / 0 start
            if "norm" in name or name.endswith("bias"):
                parameter.add_((torch.rand_like(parameter) - 0.5).half().float())
    model.use_half_weights(True)
    return model


def sources(lengths=(7, 4, 9), seed=1) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(4, 37, (n - 1,), generator=generator).tolist() + [3] for n in lengths]


def decode_both(model, decode):
    model.fused_decoding = False
    python = decode()
    model.fused_decoding = True
    return python, decode()


@pytest.mark.parametrize("rows", [1, 3, 4, 5, 8])
@pytest.mark.parametrize("outputs, width", [(1, 16), (63, 37), (64, 256), (65, 24), (200, 96)])
def test_packed_weights_give_the_product(kernel, rows, outputs, width):
    """On AVX-512 CPUs the fused step reads its projections packed in blocks of 64 outputs (fused_step.pack); the
    product through them against float64, for block counts with and without a padded last block."""
    if not kernel.has_avx512():
        pytest.skip("packed weights are read on AVX-512 CPUs only; others keep the row-major product")
    torch.manual_seed(rows * outputs + width)
    x, weight, bias = torch.randn(rows, width), torch.randn(outputs, width).half(), torch.randn(outputs)
    expected = torch.nn.functional.linear(x.double(), weight.double(), bias.double())
    # float32 sums of up to 256 products against float64: ~sqrt(width) ulps of values of order 10, well inside 1e-5
    torch.testing.assert_close(kernel.packed_linear(x, pack(weight), bias).double(), expected, rtol=1e-5, atol=1e-5)


def test_the_shipped_like_model_runs_on_the_kernel():
    model = shipped_like()
    assert why_not_fused(model, 3) is None
    memory, src_mask = encode_batch(model, sources(), "cpu")
    assert StepDecoder(model, memory, src_mask).fused is not None


@pytest.mark.parametrize("shape", SHAPES)
def test_steps_match_the_python_step_while_rows_move(shape):
    """Logits step by step, with padded sentences and rows dropped, repeated and reordered as beam search does."""
    model = shipped_like(**SHAPES[shape])
    with torch.inference_mode():
        memory, src_mask = encode_batch(model, sources(), "cpu")
        decoders = {}
        for fused in (False, True):
            model.fused_decoding = fused
            decoders[fused] = StepDecoder(model, memory, src_mask)
        assert decoders[True].fused is not None and decoders[False].fused is None
        moves = [None, [0, 0, 1, 2, 2], None, [4, 1, 0], [2, 2, 2, 0], None]
        for step, rows in enumerate(moves):
            logits = {fused: decoder.step() for fused, decoder in decoders.items()}
            # our kernel against torch's F.linear and attention: other orders of float32 sums through the layers,
            # on logits of order 10 (2e-5 absolute, 1e-5 relative)
            torch.testing.assert_close(logits[True], logits[False], atol=2e-5, rtol=1e-5)
            tokens = logits[False].argmax(dim=-1)
            for decoder in decoders.values():
                if rows is not None:
                    decoder.select_rows(rows)
                decoder.append(tokens if rows is None else tokens[rows])


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("decode", ["greedy", "beam"])
def test_translations_and_recordings_match(decode, shape):
    model = shipped_like(**SHAPES[shape])
    batch = sources()
    run = {"greedy": lambda: decode_greedy(model, batch, GreedySettings(), probes=STEP_PROBES),
           "beam": lambda: beam_search(model, batch[:2], 3, probes=STEP_PROBES)}[decode]
    python, fused = decode_both(model, run)
    for slow, fast in zip(python, fused):
        assert fast.token_ids == slow.token_ids
        assert [s.token_id for s in fast.steps] == [s.token_id for s in slow.steps]
        for probe in STEP_PROBES:  # the kernel against the Python step: float32 rounding carried through the layers
            torch.testing.assert_close(torch.as_tensor(fast.recorded[probe]), torch.as_tensor(slow.recorded[probe]),
                                       atol=3e-5, rtol=1e-5)


def test_recording_the_steps_changes_no_number():
    """Recording the decoder's steps (the encoder's capture switches its attention path, so it is left out) leaves
    every probability exactly as it was."""
    model = shipped_like()
    plain = decode_greedy(model, sources(), GreedySettings())
    captured = decode_greedy(model, sources(), GreedySettings(), probes=("decoder_self", "cross", "decoder_hidden"))
    assert [s.token_ids for s in plain] == [s.token_ids for s in captured]
    # exact: recording only copies what the same ops computed, on the same tensors in the same thread
    assert [[t.prob for t in s.steps] for s in plain] == [[t.prob for t in s.steps] for s in captured]


def test_a_changed_norm_is_read_and_a_changed_weight_falls_back():
    model = shipped_like()
    src = sources()[:1]
    with torch.no_grad():
        model.decoder_layers[1].cross_attention_residual.norm.weight.mul_(1.5)  # read in place, no copy to refresh
    python, fused = decode_both(model, lambda: decode_greedy(model, src, GreedySettings(), probes=("cross",)))
    torch.testing.assert_close(  # the kernel against the Python step: float32 rounding, as above
        torch.as_tensor(fused[0].recorded["cross"]), torch.as_tensor(python[0].recorded["cross"]), atol=3e-5, rtol=1e-5
    )
    with torch.no_grad():
        model.decoder_layers[0].feed_forward.fc1.weight.mul_(0.5)  # its float16 copy is now stale
    assert why_not_fused(model, 1) == "a weight has no current float16 copy"
    model.use_half_weights(True)
    assert why_not_fused(model, 1) is None


def test_switched_off_heads_run_the_python_step():
    model = shipped_like()
    with heads_masked(model, [("cross", 0, 1)]):
        assert why_not_fused(model, 1) == "heads are switched off in this context"
        masked = decode_greedy(model, sources()[:1], GreedySettings(), probes=("cross",))
    model.fused_decoding = False
    with heads_masked(model, [("cross", 0, 1)]):
        reference = decode_greedy(model, sources()[:1], GreedySettings(), probes=("cross",))
    assert masked[0].token_ids == reference[0].token_ids
    # exact: both ran the Python step, the same ops on the same tensors in the same thread
    assert torch.equal(torch.as_tensor(masked[0].recorded["cross"]), torch.as_tensor(reference[0].recorded["cross"]))


@pytest.mark.parametrize("case, reason", [
    ("post-norm", "the kernel runs pre-norm layers with a final norm; this model is post-norm with a final norm"),
    ("no final norm", "the kernel runs pre-norm layers with a final norm; this model is pre-norm without a final norm"),
    ("swish", "the kernel's feed-forward is ReLU; this model's is swish"),
    ("training", "the kernel decodes float32 models in eval mode on the CPU"),
    ("many rows", f"{MAX_ROWS + 1} rows: the float16 kernel pays off up to {MAX_ROWS}"),
    ("teacher-forced probe", "an open recording asks for more than the decoder's attention and layer outputs"),
    ("switched off", "switched off (model.fused_decoding = False)"),
])
def test_where_the_kernel_does_not_run(case, reason):
    overrides = {"post-norm": {"norm": "post"}, "no final norm": {"final_norm": False},
                 "swish": {"activation": "swish"}}.get(case, {})
    model = shipped_like(**overrides)
    rows = MAX_ROWS + 1 if case == "many rows" else 1
    if case == "training":
        model.train()
    if case == "switched off":
        model.fused_decoding = False
    if case == "teacher-forced probe":
        with record(model, ["cross.transported"]):
            assert why_not_fused(model, rows) == reason
        return
    assert why_not_fused(model, rows) == reason
    memory = torch.zeros(rows, 3, model.config.d_model)
    assert FusedStep.start(model, memory, None) is None


def test_a_recording_of_another_thread_is_not_fed():
    """The kernel records into the recordings open in the calling context only, as the forward hooks do."""
    import threading

    model = shipped_like()
    with record(model, STEP_PROBES) as other:
        thread = threading.Thread(target=lambda: decode_greedy(model, sources()[:1], GreedySettings()))
        thread.start()
        thread.join()
    assert not other.calls


@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_with_its_loop_in_the_kernel_gives_the_python_loops_every_number(shape):
    """decode_fused_greedy (the whole greedy loop in fused_step.cpp) against decode_single_path with greedy's
    chooser on the same fused step: the same ids, probabilities, candidates and score, exactly."""
    from transformer.decoding.strategies.greedy import most_probable
    from transformer.decoding.strategies.single_path import decode_fused_greedy, decode_single_path

    def same(fused, python):
        assert fused.token_ids == python.token_ids and fused.score == python.score
        assert ([(s.token_id, s.prob, s.topk, s.forced) for s in fused.steps]
                == [(s.token_id, s.prob, s.topk, s.forced) for s in python.steps])

    model = shipped_like(**SHAPES[shape])
    for source in sources((7, 4, 9, 1, 40)):
        for max_length in (None, 1, 3):
            same(decode_fused_greedy(model, source, most_probable, max_length),
                 decode_single_path(model, [source], most_probable, max_length)[0])
    model.fused_decoding = False  # the Python loop's case: decode_single_path on the same encoder output
    same(decode_fused_greedy(model, sources((5,))[0], most_probable),
         decode_single_path(model, sources((5,)), most_probable)[0])


def test_greedy_takes_the_kernels_loop_only_for_one_unrecorded_unforced_sentence(monkeypatch):
    from transformer.decoding.strategies import single_path

    model = shipped_like()
    calls = []
    original = single_path.decode_fused_greedy
    monkeypatch.setattr("transformer.decoding.strategies.greedy.decode_fused_greedy",
                        lambda *args: calls.append(args) or original(*args))
    [one] = sources((6,))
    decode_greedy(model, [one], GreedySettings())
    assert len(calls) == 1
    decode_greedy(model, sources((6, 5)), GreedySettings())  # two sentences
    decode_greedy(model, [one], GreedySettings(), probes=("cross",))  # recorded
    decode_greedy(model, [one], GreedySettings(), prefixes=[[5]])  # forced start
    assert len(calls) == 1


def test_the_kernels_numbers_do_not_depend_on_the_thread_count(kernel):
    """The products split their outputs across torch's threads (the kernel is built with OpenMP): blocks of 64
    outputs, so a 300-output product and this model's 192- and 128-output projections are split; each output is
    summed by one thread in one order, so one and two threads give the same bits. A whole decode also runs torch's
    own kernels (the encoder's many-row products, attention's matmuls), whose sums may be split differently by
    thread count on some CPUs (an AVX-512 EPYC differs in the last bits at 1 and 2 threads): there the same tokens,
    and numbers within float32 rounding carried through the layers."""
    model = shipped_like(**SHAPES["width 64, tied"])
    source = sources((9,))[0]
    threads = torch.get_num_threads()
    try:
        decoded = {}
        for count in (1, 2):
            torch.set_num_threads(count)
            [decoded[count]] = decode_greedy(model, [source], GreedySettings(), probes=STEP_PROBES)
        weight = torch.randn(300, 96).half()
        x = torch.randn(3, 96)
        products = {}
        for count in (1, 2):
            torch.set_num_threads(count)
            products[count] = kernel.packed_linear(x, pack(weight), torch.zeros(300)) if kernel.has_avx512() else \
                kernel.linear(x, weight, None)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(products[1], products[2])  # our kernel: every sum in one fixed order
    assert decoded[1].token_ids == decoded[2].token_ids
    # torch's kernels: a reordered float32 sum differs by a few ulps (~1e-7 relative) per product; 1e-5 leaves room
    # for the handful of layers and the softmax it passes through, and is far below any change of a token's choice
    one, two = ([s.prob for s in decoded[count].steps] for count in (1, 2))
    torch.testing.assert_close(torch.tensor(one), torch.tensor(two), rtol=1e-5, atol=1e-6)
    for name in STEP_PROBES:
        torch.testing.assert_close(decoded[1].recorded[name], decoded[2].recorded[name], rtol=1e-5, atol=1e-6,
                                   msg=name)
