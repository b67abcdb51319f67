"""docs/model-cards.md holds each shipped checkpoint's card as transformer.training.model_card makes it from the
checkpoint's metrics.json now (scripts/write_model_cards.py writes them), and the text around the cards is kept."""
import json

import pytest

from .conftest import ROOT, script

DOC = ROOT / "docs" / "model-cards.md"
CHECKPOINTS = sorted(f"checkpoints/{path.parent.name}" for path in (ROOT / "checkpoints").glob("*/metrics.json"))


def test_every_shipped_checkpoint_has_a_card_on_the_page():
    writer = script("write_model_cards")
    assert CHECKPOINTS and writer.shipped_checkpoints() == CHECKPOINTS
    assert sorted(writer.cards_in(DOC.read_text(encoding="utf-8"))) == CHECKPOINTS


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_the_page_holds_the_card_metrics_json_makes_now(checkpoint):
    writer = script("write_model_cards")
    shown = writer.cards_in(DOC.read_text(encoding="utf-8")).get(checkpoint)
    assert shown == writer.card_of(checkpoint), (
        f"docs/model-cards.md's card of {checkpoint} differs from its metrics.json; rewrite it with "
        f"`{writer.COMMAND}`")


@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_the_page_names_the_command_of_every_stage(checkpoint):
    """Read from metrics.json directly, not through the card's code: each stage that recorded its command."""
    metrics = json.loads((ROOT / checkpoint / "metrics.json").read_text(encoding="utf-8"))
    stages = [*metrics.get("earlier_stages", []), metrics["training"]]
    card = script("write_model_cards").cards_in(DOC.read_text(encoding="utf-8"))[checkpoint]
    commands = [stage["command"] for stage in stages if stage.get("command")]
    assert commands, f"{checkpoint}'s metrics.json records no command"
    missing = [command for command in commands if f"`{command}`" not in card]
    assert not missing, f"docs/model-cards.md's card of {checkpoint} does not name {missing}"


def test_the_cards_are_written_between_their_markers_and_the_rest_is_kept():
    writer = script("write_model_cards")
    begin, end = "<!-- model card: checkpoints/a: begin -->", "<!-- model card: checkpoints/a: end -->"
    text = f"# Cards\n\nintro\n\n## A\n\nstory\n\n{begin}\n\nold card\n\n{end}\n\nfooter\n"
    rewritten = writer.with_cards(text, {"checkpoints/a": "- new\n\n| a |"})
    assert rewritten == f"# Cards\n\nintro\n\n## A\n\nstory\n\n{begin}\n\n- new\n\n| a |\n\n{end}\n\nfooter\n"
    assert writer.cards_in(rewritten) == {"checkpoints/a": "- new\n\n| a |"}
    assert writer.with_cards(rewritten, {"checkpoints/a": "- new\n\n| a |"}) == rewritten
    with pytest.raises(ValueError, match=r"no markers for \['checkpoints/b'\]"):
        writer.with_cards(text, {"checkpoints/b": "card"})
