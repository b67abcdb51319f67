"""Names of what to record, read one way on every surface (core/probes.py `name_list`): `record`, `capture_attention`
and `Translator.translate(record=...)` take one name as a string (never its letters) or a list of strings; anything
else is a TypeError naming the argument and the bad item; an unknown name is named with the nearest valid ones; and
reading a name that was not recorded is a KeyError naming what was."""
import pytest
import torch

from transformer import Transformer
from transformer.core.capture import capture_attention, record

from .conftest import tiny_config


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer(tiny_config(n_layers=2)).eval()


def batch():
    return torch.tensor([[5, 6, 7, 3]]), torch.tensor([[2, 8, 9]])


@pytest.mark.parametrize("names, message", [
    (42, r"^names must be a name or a list of names \(strings\), got an int$"),
    ([42], r"^names must be a name or a list of names \(strings\); item 0 is an int \(42\)$"),
    (["cross", None], r"^names must be .*; item 1 is None \(None\)$"),
    ({"cross"}, r"^names must be a name or a list of names \(strings\), got a set$"),
])
def test_record_names_the_argument_and_the_bad_item(model, names, message):
    with pytest.raises(TypeError, match=message):
        with record(model, names):
            pass
    assert all(not m._forward_hooks for m in model.modules())


def test_one_name_as_a_string_is_one_name(model):
    src, tgt = batch()
    with record(model, "cross") as one, record(model, ["cross"]) as listed:
        model(src, tgt)
    assert one.paths == listed.paths == [f"decoder_layers.{i}.cross_attention.weights" for i in range(2)]
    assert torch.equal(one["cross"], listed["cross"])
    with capture_attention(model, "cross") as att:
        model(src, tgt)
    heads = model.config.decoder.heads
    assert att.cross.shape == (2, 1, heads, tgt.size(1), src.size(1))  # (layers, B, H, T, S)
    assert att.encoder_self is None  # an attention kind not asked for


@pytest.mark.parametrize("call, message", [
    (lambda m: record(m, ["cross.weight"]), r"records nothing named 'cross\.weight' \(did you mean 'cross\.weights'"),
    (lambda m: capture_attention(m, "crosss"), r"^kinds: unknown attention kinds 'crosss' \(did you mean 'cross'"),
    (lambda m: capture_attention(m, ["cross", "decoder_ff.hidden"]), r"unknown attention kinds 'decoder_ff\.hidden'"),
])
def test_an_unknown_name_is_named_with_the_nearest_valid_one(model, call, message):
    with pytest.raises(ValueError, match=message):
        with call(model):
            pass


def test_reading_a_name_that_was_not_recorded_names_what_was(model):
    src, tgt = batch()
    with record(model, ["cross.weights"]) as recording:
        model(src, tgt)
    with pytest.raises(KeyError) as error:
        recording["cross.weight"]
    assert "'cross.weight' was not recorded (did you mean 'cross.weights'" in str(error.value)
    assert "this recording holds ['cross.weights']" in str(error.value)
    with pytest.raises(KeyError, match="'encoder_self' was not recorded"):
        recording["encoder_self"]
    with pytest.raises(TypeError, match="read by name"):
        recording[0]
    # what was recorded reads as the probabilities it holds: every row of every head sums to 1
    torch.testing.assert_close(recording["cross.weights"].sum(-1), torch.ones(2, 1, 4, tgt.size(1)))


def test_translate_reads_record_the_same_way(random_translator):
    one = random_translator.translate("a dog runs .", strategy="greedy", record="decoder_hidden")
    assert set(one.recorded) == {"decoder_hidden"}
    listed = random_translator.translate("a dog runs .", strategy="greedy", record=["decoder_hidden"])
    assert (one.recorded["decoder_hidden"].values == listed.recorded["decoder_hidden"].values).all()
    with pytest.raises(TypeError, match=r"^record must be a name or a list of names \(strings\); item 1 is an int"):
        random_translator.translate("a dog .", strategy="greedy", record=["nope", 42])
    with pytest.raises(ValueError, match=r"^record: unknown probes 'decoder_hiden' \(did you mean 'decoder_hidden'"):
        random_translator.translate("a dog .", strategy="greedy", record="decoder_hiden")
