"""One head address: 0-based inside, 1-based in text and reports, converted in one place."""
import pytest

from explorer.heads_off import format_heads_off, parse_heads_off
from transformer.core.head_ref import HeadRef, head_label, layer_label


@pytest.mark.parametrize("text, ref", [("cross 3 2", ("cross", 2, 1)), ("  encoder_self 1 1 ", ("encoder_self", 0, 0)),
                                       ("decoder_self 12 8", ("decoder_self", 11, 7))])
def test_text_is_numbered_from_one_and_the_address_from_zero(text, ref):
    parsed = HeadRef.parse(text)
    assert parsed == ref and parsed.entry == " ".join(text.split())
    assert parsed.numbered() == {"kind": ref[0], "layer": ref[1] + 1, "head": ref[2] + 1}
    assert HeadRef.from_numbered(parsed.numbered()) == parsed
    assert parsed.label == f"layer {ref[1] + 1} head {ref[2] + 1}"


@pytest.mark.parametrize(
    "text, complaint",
    [
        ("cross 0 1", "numbered from 1"),
        ("cross 3", "must be 'kind layer head'"),
        ("sideways 1 1", "must be 'kind layer head'"),
        ("cross a b", "kind layer"),
    ],
)
def test_a_malformed_entry_is_named(text, complaint):
    with pytest.raises(ValueError, match=complaint):
        HeadRef.parse(text)


def test_heads_off_text_round_trips_through_the_address():
    entries = parse_heads_off("cross 3 2; decoder_self 1 4, encoder_self 2 1")
    assert entries == [("cross", 2, 1), ("decoder_self", 0, 3), ("encoder_self", 1, 0)]
    assert format_heads_off(entries) == "cross 3 2; decoder_self 1 4; encoder_self 2 1"
    assert parse_heads_off("  ") is None
    assert (layer_label(0), head_label(3)) == ("layer 1", "head 4")
