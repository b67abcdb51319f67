"""What decoding runs and what it records: a text-only greedy translation runs the encoder once also where the fused
step is off; every point the model declares is recorded at every decoding step (the encoder's once), equal to a
teacher-forced pass over the same prefix; and reading a point nothing reached is an error naming it."""
import pytest
import torch

from transformer import Tokenizer, Transformer, Translator
from transformer.core.capture import NotReached, capture_attention, record
from transformer.core.fused_step import why_not_fused
from transformer.core.probes import recordable
from transformer.decoding.step_decoder import forbid_never_produced
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy

from .conftest import FLOAT32_ROUNDING, tiny_config
from .test_fused_step import shipped_like, sources

# a step against a teacher-forced pass: the float16 kernel or the cached Python step (the cross-attention folded into
# its projections for short sources) sums in other orders than the full pass; test_fused_step.py bounds the kernel's
# difference at 3e-5 on weights, and hidden states and logits of a few units keep it within rtol=1e-5
STEP_ROUNDING = dict(atol=3e-5, rtol=1e-5)


@pytest.mark.parametrize("fused_off", ["switched off", "no float16 copies"])
def test_a_text_only_greedy_translation_runs_the_encoder_once(tokenizer_file, fused_off):
    """Without the fused step, the fused greedy path hands its encoder output to the step-by-step loop; the
    translation is the one an independent greedy loop of full teacher-forced passes gives."""
    tokenizer = Tokenizer.load(tokenizer_file)
    if fused_off == "switched off":  # float16-exact weights with their copies: only the switch keeps the kernel off
        model = shipped_like(tokenizer.vocab_size)
        model.fused_decoding = False
    else:
        torch.manual_seed(0)
        model = Transformer(tiny_config(tokenizer.vocab_size)).eval()
        model.use_half_weights(True)  # float16 would round these weights: no copy is kept
    assert why_not_fused(model, 1) is not None
    encoder_runs = []
    handle = model.encoder_layers[0].register_forward_hook(lambda *args: encoder_runs.append(1))
    try:
        translation = Translator(model, tokenizer).translate("a man rides a bike .", strategy="greedy", max_length=6)
    finally:
        handle.remove()
    assert len(encoder_runs) == 1

    src = torch.tensor([translation.src_ids])
    decoder_input, probabilities = [model.config.decoder_start_id], []
    with torch.no_grad():
        while len(decoder_input) <= 6 and decoder_input[-1] != model.config.eos_id:
            logits = forbid_never_produced(model(src, torch.tensor([decoder_input]))[0, -1], model.config)
            probs = logits.softmax(-1)
            decoder_input.append(int(probs.argmax()))
            probabilities.append(float(probs.max()))
    assert translation.tgt_ids == decoder_input[1:]
    torch.testing.assert_close(torch.tensor([s.prob for s in translation.steps]), torch.tensor(probabilities),
                               **FLOAT32_ROUNDING)


def last_positions(step: torch.Tensor, forced: torch.Tensor, position: int) -> torch.Tensor:
    """The teacher-forced tensor `forced` (over `position` + 1 decoder inputs) at the step's one new position: on
    every axis where the step holds 1 and the pass holds `position` + 1, the last (the new query, the newest input)."""
    for axis, (size, full) in enumerate(zip(step.shape, forced.shape)):
        if size == 1 and full == position + 1 > 1:
            forced = forced.narrow(axis, position, 1)
    return forced


@pytest.mark.parametrize("source_length", [4, 9])  # 4: the cached step folds the cross-attention's source (in tiny)
@pytest.mark.parametrize("step", ["kernel", "python"])
def test_every_declared_point_is_recorded_at_every_decoding_step(step, source_length, request):
    """Each point alone, recorded around greedy decoding (what translate() runs): a decoder point holds one tensor
    per step, equal to a teacher-forced pass over that step's decoder inputs at its new position; an encoder point
    holds one, equal to the pass's. None reads as silence."""
    if step == "kernel":
        request.getfixturevalue("kernel")  # skips where the kernel cannot exist
    model = shipped_like()
    model.fused_decoding = step == "kernel"
    [source] = sources((source_length,))
    [plain] = decode_greedy(model, [source], GreedySettings(), max_length=4)
    steps = len(plain.token_ids)
    src = torch.tensor([source])
    decoder_inputs = [model.config.decoder_start_id, *plain.token_ids[:-1]]
    forced = []  # per step: every point of a teacher-forced pass over that step's decoder inputs
    for position in range(steps):
        with torch.no_grad(), record(model, ["**"]) as everything:
            model(src, torch.tensor([decoder_inputs[: position + 1]]))
        forced.append(everything)
    points = list(recordable(model))
    assert len(points) == len({*points}) > 100
    for point in points:
        with record(model, [point]) as rec:
            [decoded] = decode_greedy(model, [source], GreedySettings(), max_length=4)
        assert decoded.token_ids == plain.token_ids, point  # recording changes nothing decoded
        calls = rec.take(point)
        if point.startswith("encoder"):
            assert len(calls) == 1, point
            torch.testing.assert_close(calls[0], forced[0][point][0], **STEP_ROUNDING,
                                       msg=lambda message: f"{point}: {message}")
            continue
        assert len(calls) == steps, point
        for position, value in enumerate(calls):
            want = last_positions(value, forced[position][point][0], position)
            assert value.shape == want.shape, (point, position)
            torch.testing.assert_close(value, want, **STEP_ROUNDING,
                                       msg=lambda message: f"{point} at step {position}: {message}")


def test_a_point_nothing_reached_is_an_error_naming_it():
    """A declared point the block never passed (the decoder's, around the encoder alone) raises NotReached naming it
    and the teacher-forced pass that reaches it, from `[]`, `take` and the attention views; a point reached and
    taken reads as nothing left."""
    torch.manual_seed(0)
    model = Transformer(tiny_config()).eval()
    src = torch.tensor([[5, 6, 7, 3]])
    with torch.no_grad(), record(model, ["decoder_layers.1.output", "encoder_hidden"]) as rec:
        model.encode(src)
    for read in (lambda: rec["decoder_layers.1.output"], lambda: rec.take("decoder_layers.1.output")):
        with pytest.raises(NotReached, match=r"'decoder_layers\.1\.output'.*teacher-forced pass, model\(src, tgt\)"):
            read()
    assert len(rec.take("encoder_hidden")) == model.config.encoder.layers
    assert rec.take("encoder_hidden") == [] and rec["encoder_hidden"] is None  # reached, then taken
    with torch.no_grad(), capture_attention(model, "cross") as att:
        model.encode(src)
    with pytest.raises(NotReached, match=r"'cross': .*'decoder_layers\.0\.cross_attention\.weights' and 1 more"):
        att.cross
