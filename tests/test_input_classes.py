"""Bad input closed by class, each class on every surface that takes it: text that is not valid Unicode (the HTTP
atlas endpoints, the atlas command line, the package's Translator, atlas query and tokenizer), a choice-like
argument sent as a JSON object or list (the request, the atlas endpoints, the package), and an output path inside a
file (the shared check of the command lines and the atlas build). Every message names the argument or the path."""
from types import SimpleNamespace

import gradio as gr
import pytest

from explorer.atlas_api import atlas_map_endpoint, atlas_neighbours_endpoint
from explorer.registry import discover
from explorer.request import Request, RequestError, check_unicode
from explorer.session import ModelService
from transformer.analysis.query_key import query_key
from transformer.atlas import Atlas, BuildSettings, build_atlas
from transformer.atlas.cli import main as atlas_main
from transformer.atlas.query import sentence_vectors
from transformer.atlas.store import AtlasError
from transformer.checkpoint import CheckpointError, checkpoint_folder
from transformer.choices import ChoiceError
from transformer.command_line import InputError, check_writable
from transformer.decoding.strategies import SettingError
from transformer.decoding.translator import check_device
from transformer.path_checks import folder_problem
from transformer.unicode_text import TextError

from .atlas_fixtures import tiny_checkpoint

SURROGATE = "a \ud800 dog ."  # character 3 is the lone surrogate, counted from 1 as the messages count
ARGV_BYTE = "a \udcff dog ."  # the byte 0xFF of a command line that is not UTF-8, as Python hands it over
SENTENCE = "a red ball ."


@pytest.fixture(scope="module")
def ui(tmp_path_factory, corpus_dir, tokenizer_file):
    root = tmp_path_factory.mktemp("served")
    folder = tiny_checkpoint(root / "tiny", tokenizer_file)
    build_atlas(folder, corpus_dir, folder / "atlas", BuildSettings(sentences=24, sample=100, projection="pca"))
    return SimpleNamespace(registry=discover(root))


def api_message(call, **arguments) -> str:
    with pytest.raises(gr.Error) as error:
        call(**arguments)
    return str(error.value.message)


def cli_line(capsys, argv) -> str:
    """The one line a command line answers bad input with (exit status 2, no traceback)."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        atlas_main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


# ---- text that is not valid Unicode: one check, every surface, the argument named


def test_the_atlas_endpoints_name_the_text(ui):
    neighbours = atlas_neighbours_endpoint(ui)
    message = api_message(neighbours, text=SURROGATE, token=1, layer=1, side="source", k=3, model="tiny")
    assert message.startswith("text is not valid Unicode text: character 3 is a lone surrogate (U+D800)")
    message = api_message(atlas_map_endpoint(ui), kind="cross", layer=1, head=1, text=SURROGATE, model="tiny")
    assert message.startswith("text is not valid Unicode text: character 3 is a lone surrogate (U+D800)")


def test_the_atlas_command_line_names_the_argument_and_the_byte(ui, capsys):
    atlas = str(ui.registry.get("tiny").translator.source / "atlas")
    line = cli_line(capsys, ["neighbours", atlas, "--sentence", ARGV_BYTE, "--token", "1", "--layer", "1"])
    assert "argument --sentence: is not valid Unicode text: character 3" in line
    assert "U+DCFF" in line and "0xFF" in line


def test_the_package_names_the_argument(ui):
    translator = ui.registry.get("tiny").translator
    with pytest.raises(TextError, match="^text is not valid Unicode text: character 3 ") as error:
        translator.translate(SURROGATE, strategy="greedy")
    assert error.value.name == "text"
    with pytest.raises(TextError, match=r"^texts\[1\] is not valid Unicode"):
        translator.translate_batch([SENTENCE, SURROGATE], strategy="greedy")
    with pytest.raises(TextError, match="^prefix is not valid Unicode text: character 1 "):
        translator.translate(SENTENCE, strategy="greedy", prefix="\udcffein")
    with pytest.raises(TextError, match="^sentence is not valid Unicode"):
        sentence_vectors(translator.model, translator.tokenizer, SURROGATE)
    with pytest.raises(TextError, match="^text is not valid Unicode"):  # whatever reaches the tokenizer itself
        translator.tokenizer.encode(SURROGATE)
    with pytest.raises(TextError, match="^text must be text"):
        translator.translate(42, strategy="greedy")
    assert translator.translate(SENTENCE, strategy="greedy").source == SENTENCE  # valid text still translates


def test_the_explorer_check_is_the_packages_and_names_its_field():
    with pytest.raises(RequestError) as error:
        check_unicode("prefix", "ok \ud83d")  # half of an emoji's surrogate pair: character 4
    assert error.value.field == "prefix" and str(error.value).startswith(
        "prefix is not valid Unicode text: character 4 is a lone surrogate (U+D83D)")
    check_unicode("prefix", "ok 🐕")  # the whole pair is one character, and valid


# ---- choice-like arguments: a string before it is looked up


@pytest.mark.parametrize("sent, phrase", [({"key": "tiny"}, "a dict"), (["tiny"], "a list"), (7, "an int")])
def test_the_atlas_endpoints_name_a_model_that_is_no_string(ui, sent, phrase):
    expected = f"model must be a string naming one of ['tiny'], got {phrase}"
    for call, arguments in ((atlas_neighbours_endpoint(ui), {"text": SENTENCE}),
                            (atlas_map_endpoint(ui), {"kind": "cross"})):
        assert api_message(call, **arguments, model=sent) == expected


def test_the_atlas_endpoints_name_a_kind_or_side_that_is_no_string(ui):
    message = api_message(atlas_neighbours_endpoint(ui), text=SENTENCE, side={"a": 1}, model="tiny")
    assert message == "side must be a string naming one of ['source', 'target'], got a dict"
    message = api_message(atlas_map_endpoint(ui), kind=["cross"], model="tiny")
    assert message == "kind must be a string naming one of ['encoder_self', 'decoder_self', 'cross'], got a list"


@pytest.mark.parametrize("field, sent", [("model", {"x": 1}), ("device", ["cpu"]), ("strategy", {"beam": 1})])
def test_a_request_names_a_choice_that_is_no_string(ui, field, sent):
    with pytest.raises(RequestError) as error:
        Request.build(ui.registry, SENTENCE, **{field: sent})
    assert error.value.field == field
    assert str(error.value).startswith(f"{field} must be a string naming one of [")
    assert str(error.value).endswith(f"got a {type(sent).__name__}")


def test_the_package_names_a_choice_that_is_no_string(ui):
    translator = ui.registry.get("tiny").translator
    with pytest.raises(SettingError, match=r"^strategy must be a string naming one of \['greedy'.*got a dict$"):
        translator.translate(SENTENCE, strategy={"greedy": 1})
    with pytest.raises(ChoiceError, match="^device must be a string such as 'cpu' or 'cuda', got a list$"):
        check_device(["cpu"])
    ids = translator.tokenizer.encode(SENTENCE)
    with pytest.raises(ChoiceError, match="^kind must be a string naming one of .*got a dict$"):
        query_key(translator.model, ids, ids, {"cross": 1}, 0, 0, 0)


# ---- paths: a message says what the path is


def test_an_output_inside_a_file_is_named_as_a_file(tmp_path):
    somefile = tmp_path / "somefile"
    somefile.write_text("not a folder")
    with pytest.raises(InputError) as error:
        check_writable(somefile / "out.json")
    assert str(error.value) == f"{somefile / 'out.json'}: its folder {somefile} is a file, not a folder"
    with pytest.raises(InputError, match="cannot be made: .*somefile is a file, not a folder"):
        check_writable(somefile / "deeper" / "out.json")
    with pytest.raises(InputError, match="no-such-folder does not exist$"):
        check_writable(tmp_path / "no-such-folder" / "out.json")


def test_a_read_only_folder_is_named_as_read_only(tmp_path, monkeypatch):
    """Root writes anywhere, so read-only is what os.access answers here."""
    monkeypatch.setattr("transformer.path_checks.os.access", lambda path, mode: False)
    assert folder_problem(tmp_path) == "is read-only (it cannot be written to)"
    with pytest.raises(InputError, match="is read-only"):
        check_writable(tmp_path / "out.json")


def test_the_atlas_build_names_an_out_inside_a_file(ui, corpus_dir, tmp_path, capsys):
    somefile = tmp_path / "somefile"
    somefile.write_text("not a folder")
    checkpoint = str(ui.registry.get("tiny").translator.source)
    line = cli_line(capsys, ["build", checkpoint, str(corpus_dir), str(somefile / "out"), "--sentences", "4",
                             "--projection", "pca"])
    assert f"{somefile / 'out'}: its folder {somefile} is a file, not a folder" in line
    assert "does not exist" not in line
    line = cli_line(capsys, ["build", checkpoint, str(somefile), str(tmp_path / "out")])
    assert f"{somefile}: corpus folder is a file, not a folder" in line


def test_the_package_names_a_folder_that_is_a_file(tmp_path):
    somefile = tmp_path / "somefile"
    somefile.write_text("not a folder")
    with pytest.raises(CheckpointError, match="checkpoint folder is a file, not a folder"):
        checkpoint_folder(somefile)
    with pytest.raises(AtlasError, match="atlas folder is a file, not a folder"):
        Atlas.open(somefile)


def test_a_typed_continuation_is_named(ui):
    """The what-if view's typed continuation (session.pieces) passes the same check, named as the page names it."""
    result = SimpleNamespace(model_key="tiny")
    service = SimpleNamespace(translator_of=lambda result: ui.registry.get(result.model_key).translator)
    with pytest.raises(TextError, match="^continuation is not valid Unicode text: character 1 "):
        ModelService.pieces(service, result, "\ud800ein")
