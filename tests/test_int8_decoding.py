"""The opt-in int8 decoding (model.int8_decoding): the kernel reads int8 copies of the decoder's projections, one
symmetric scale per output. Checked against an independent computation: the same model with those projections
replaced by their dequantized weights (computed here), decoded by the Python float32 step."""
import copy

import pytest
import torch

from transformer.core.fused_step import FusedStep, quantize, why_not_fused
from transformer.decoding.strategies.beam import beam_search
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy

from .test_fused_step import SHAPES, STEP_PROBES, shipped_like, sources

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel")]  # the kernel fixture: tests/conftest.py


def dequantized(weight: torch.Tensor) -> torch.Tensor:
    """What int8 with one scale per output row keeps of `weight`, computed without fused_step.quantize (in float32,
    as it is specified: a quotient at a rounding boundary in float32 may fall on the other side in float64)."""
    weight = weight.detach().float()
    scale = weight.abs().max(dim=1, keepdim=True).values / 127
    scale[scale == 0] = 1
    return (torch.round(weight / scale).clamp(-127, 127).double() * scale.double()).float()


def int8_reference(model):
    """A copy of `model` whose decoder projections hold their dequantized weights (the cross-attention's query rows
    alone: its keys and values stay float32), decoded by the Python step."""
    reference = copy.deepcopy(model)
    d = model.config.d_model
    with torch.no_grad():
        for layer in reference.decoder_layers:
            for linear in (layer.self_attention.in_proj, layer.self_attention.out_proj, layer.cross_attention.out_proj,
                           layer.feed_forward.fc1, layer.feed_forward.fc2):
                linear.weight.copy_(dequantized(linear.weight))
            layer.cross_attention.in_proj.weight[:d] = dequantized(layer.cross_attention.in_proj.weight[:d])
        reference.generator.weight = torch.nn.Parameter(
            dequantized(reference.generator.weight)
        )  # untied from the embedding
    reference.fused_decoding = False
    return reference


@pytest.fixture
def avx512(kernel):
    if not kernel.has_avx512():
        pytest.skip("int8 decoding needs an AVX-512 CPU")
    return kernel


@pytest.mark.parametrize("rows", [1, 3, 4, 5])
@pytest.mark.parametrize("outputs, width", [(1, 16), (63, 37), (65, 24), (200, 96)])
def test_int8_weights_give_the_dequantized_product(avx512, rows, outputs, width):
    torch.manual_seed(rows * outputs + width)
    x, weight, bias = torch.randn(rows, width), torch.randn(outputs, width), torch.randn(outputs)
    weight[0] = 0  # a row of zeros keeps scale 1
    packed, scales = quantize(weight)
    assert packed.dtype == torch.int8 and scales.shape == (outputs,)
    # rounding to the nearest step errs by half a step at most; 1e-7 more for the float32 division into steps
    assert (weight - dequantized(weight)).abs().max() <= scales.max() / 2 + 1e-7
    expected = torch.nn.functional.linear(x.double(), dequantized(weight).double(), bias.double())
    # float32 sums of up to 96 products against float64: ~sqrt(width) ulps of values of order 10, inside 1e-5
    torch.testing.assert_close(avx512.packed_linear(x, packed, bias, scales).double(), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="int8 weights need scales"):
        avx512.packed_linear(x, packed, bias)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("decode", ["greedy", "greedy, one sentence", "beam"])
def test_int8_decoding_is_the_python_step_on_dequantized_weights(avx512, decode, shape):
    model = shipped_like(**SHAPES[shape])
    model.int8_decoding = True
    assert why_not_fused(model, 3) is None
    reference = int8_reference(model)
    batch = sources()
    run = {"greedy": lambda m: decode_greedy(m, batch, GreedySettings(), probes=STEP_PROBES),
           "greedy, one sentence": lambda m: decode_greedy(m, batch[2:], GreedySettings()),  # the kernel's own loop
           "beam": lambda m: beam_search(m, batch[:2], 3, probes=STEP_PROBES)}[decode]
    for fast, slow in zip(run(model), run(reference)):
        assert fast.token_ids == slow.token_ids
        # our kernel against the Python step on the same dequantized weights: other orders of float32 sums through
        # the layers (as in tests/test_fused_step.py), on probabilities <= 1
        torch.testing.assert_close(
            torch.tensor([s.prob for s in fast.steps]), torch.tensor([s.prob for s in slow.steps]), atol=2e-5, rtol=1e-4
        )
        for probe in fast.recorded:
            torch.testing.assert_close(torch.as_tensor(fast.recorded[probe]), torch.as_tensor(slow.recorded[probe]),
                                       atol=3e-5, rtol=1e-4)


def test_switching_int8_off_returns_to_the_exact_float16_numbers(avx512):
    model = shipped_like()
    [exact] = decode_greedy(model, sources()[:1], GreedySettings())
    model.int8_decoding = True
    [quantized] = decode_greedy(model, sources()[:1], GreedySettings())
    model.int8_decoding = False
    [again] = decode_greedy(model, sources()[:1], GreedySettings())
    assert [s.prob for s in again.steps] == [s.prob for s in exact.steps]  # the same path, tensors, thread: exact
    assert [s.prob for s in quantized.steps] != [s.prob for s in exact.steps]


def test_int8_without_avx512_says_why_and_decodes_in_python(kernel, monkeypatch):
    model = shipped_like()
    model.int8_decoding = True
    monkeypatch.setattr(kernel, "has_avx512", lambda: False)
    assert why_not_fused(model, 1) == "int8 decoding (model.int8_decoding) needs an AVX-512 CPU"
    assert FusedStep.start(model, torch.zeros(1, 3, model.config.d_model), None) is None
