"""The recorded reproduce command, parsed again by train's own parser, gives back the run's settings."""
import shlex

import pytest

from transformer.training.reproduce import learned_settings, reproduce_command
from transformer.training.train import build_parser


def parse_again(command: str):
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "transformer.train"]
    return build_parser().parse_args(words[3:])


RUN = ["--src", "de", "--tgt", "en", "--out", "runs/my run", "--dropout", "0.25", "--attention-dropout", "0",
       "--lr", "8e-4", "--warmup", "300", "--no-bf16", "--init-from", "checkpoints/de-en", "--max-minutes", "90",
       "--threads", "2", "--save-epochs", "--data-dir", "runs/diversified-de-en"]


@pytest.mark.parametrize("stopped_by_budget", [True, False])
def test_command_rebuilds_every_learned_setting(stopped_by_budget):
    parser = build_parser()
    args = parser.parse_args(RUN)
    again = parse_again(reproduce_command(parser, args, updates=4202, stopped_by_budget=stopped_by_budget))
    assert learned_settings(again) == learned_settings(args)
    assert again.max_minutes is None and again.threads is None and not again.save_epochs
    assert again.max_updates == (4202 if stopped_by_budget else None)


def test_defaults_are_left_out():
    parser = build_parser()
    command = reproduce_command(parser, parser.parse_args(["--out", "runs/x"]), updates=10, stopped_by_budget=False)
    assert command == "python -m transformer.train --out runs/x"


def test_the_default_corpus_read_back_as_text_is_still_left_out():
    """A resumed run gets its settings back from JSON, so its --data-dir is text, not the default Path."""
    parser = build_parser()
    args = parser.parse_args(["--out", "runs/x"])
    if args.data_dir is None:
        pytest.skip("no default corpus on this machine")
    args.data_dir = str(args.data_dir)
    assert (
        reproduce_command(parser, args, updates=10, stopped_by_budget=False)
        == "python -m transformer.train --out runs/x"
    )
