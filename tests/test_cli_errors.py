"""Every analysis command line, given a bad argument or a bad file: one line naming it, exit status 2, no traceback,
and the checkpoint folder byte-identical afterwards, however the run failed."""
import hashlib
import json
import shutil
import subprocess
import sys

import pytest
import torch

from transformer.analysis import alignment_eval, corpus_stats, faithfulness, importance
from transformer.analysis.alignment import format_pharaoh
from transformer.atlas.cli import main as atlas_main
from transformer.command_line import write_atomically
from transformer.training import evaluate, tune_length_penalty

from .conftest import ROOT

# name -> (main, flags that make a good run on the synthetic corpus besides --checkpoint, numeric flags it has)
COMMANDS = {
    "faithfulness": (
        faithfulness.main,
        ["--limit", "2", "--steps", "1"],
        ["--limit", "--steps", "--seed", "--threads"],
    ),
    "alignment_eval": (alignment_eval.main, ["--split", "test_2016_flickr"], ["--batch-size", "--threads"]),
    "importance": (importance.main, ["--limit", "2"], ["--limit", "--batch-size", "--max-tokens", "--threads"]),
    "corpus_stats": (corpus_stats.main, ["--limit", "2"], ["--limit", "--batch-size", "--threads"]),
    "evaluate": (evaluate.main, ["--strategy", "greedy"], ["--batch-size", "--beam-size", "--temperature"]),  # a
    # strategy flag is checked with its own strategy chosen (a later --strategy wins)
    "tune_length_penalty": (tune_length_penalty.main, ["--values", "1.0"], ["--batch-size", "--beam-size"]),
}
BAD_NUMBERS = ["0", "-3", "nan", "inf", "-Infinity", "1e999", "2.5", "abc", "٣"]  # "٣": float() reads it as 3


@pytest.fixture
def checkpoint(random_translator, tmp_path):
    """A copy of a tiny checkpoint with the report files the commands read (metrics.json, alignment.json)."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(random_translator.source, folder)
    (folder / "metrics.json").write_text(json.dumps({"decoding": {"strategy": "beam", "beam_size": 2,
                                                                  "length_penalty": 1.0}}))
    (folder / "alignment.json").write_text(json.dumps({"best_head": {"layer": 1, "head": 1}}))
    return folder


def fingerprint(folder) -> dict:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(folder.iterdir())}


def reference_file(random_translator, corpus_dir, tmp_path):
    """A Pharaoh reference for alignment_eval on the synthetic test split (its words are aligned one to one)."""
    sentences = (corpus_dir / "test_2016_flickr.en").read_text().splitlines()
    path = tmp_path / "reference.pharaoh"
    path.write_text("".join(format_pharaoh({(0, 0)}) + "\n" for _ in sentences))
    return path


def run(name, checkpoint, corpus_dir, extra, capsys, random_translator=None, tmp_path=None) -> str:
    """Runs the command, which must refuse: returns its one line on stderr."""
    main, good, _ = COMMANDS[name]
    arguments = ["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), *good]
    if name == "alignment_eval":
        arguments += ["--reference", str(reference_file(random_translator, corpus_dir, tmp_path))]
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        main([*arguments, *extra])
    lines = [line for line in capsys.readouterr().err.splitlines() if line and "\r" not in line]
    assert stopped.value.code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("python -m transformer.") and ": error: " in lines[0], lines
    return lines[0]


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("fault, file, content", [
    ("corrupt config", "config.json", b"{not json"),
    ("config of another model", "config.json", json.dumps({"model": {"d_model": "big"}}).encode()),
    ("empty weights", "model.safetensors", b""),
    ("truncated weights", "model.safetensors", None),
    ("missing tokenizer", "spm.model", "delete"),
])
def test_a_bad_checkpoint_file_is_named_in_one_line(name, fault, file, content, checkpoint, corpus_dir, capsys,
                                                    random_translator, tmp_path):
    path = checkpoint / file
    if content == "delete":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:100] if content is None else content)
    before = fingerprint(checkpoint)
    line = run(name, checkpoint, corpus_dir, [], capsys, random_translator, tmp_path)
    assert file in line
    assert fingerprint(checkpoint) == before


@pytest.mark.parametrize("name", COMMANDS)
def test_a_missing_checkpoint_folder_is_named(name, tmp_path, corpus_dir, capsys, random_translator):
    line = run(name, tmp_path / "no-such-folder", corpus_dir, [], capsys, random_translator, tmp_path)
    assert "no-such-folder" in line and "does not exist" in line


@pytest.mark.parametrize("name, report", [("faithfulness", "alignment.json"), ("evaluate", "metrics.json"),
                                          ("tune_length_penalty", "metrics.json")])
@pytest.mark.parametrize(
    "content", ['{"best_head": {"layer": "x"', "[1, 2]", "", '{"best_head": {"layer": 99, "head": 1}}']
)
def test_a_corrupt_report_beside_good_weights_is_named(
    name, report, content, checkpoint, corpus_dir, capsys, random_translator, tmp_path
):
    if report == "metrics.json" and "best_head" in content and content.endswith("}}"):
        content = '{"decoding": "beam"}'  # well-formed JSON, its structure wrong
    (checkpoint / report).write_text(content)
    before = fingerprint(checkpoint)
    line = run(name, checkpoint, corpus_dir, [], capsys, random_translator, tmp_path)
    assert report in line
    assert fingerprint(checkpoint) == before


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_bad_numeric_flags_are_named_before_anything_runs(name, value, checkpoint, corpus_dir, capsys,
                                                         random_translator, tmp_path):
    before = fingerprint(checkpoint)
    for flag in COMMANDS[name][2]:
        if (flag, value) in (("--seed", "0"), ("--temperature", "2.5")):
            continue  # fine values for these
        owner = {"--temperature": "sample", "--beam-size": "beam"}.get(flag) if name == "evaluate" else None
        extra = (["--strategy", owner] if owner else []) + [f"{flag}={value}"]  # "-3" alone reads as an option
        line = run(name, checkpoint, corpus_dir, extra, capsys, random_translator, tmp_path)
        assert flag in line or flag.lstrip("-").replace("-", "_") in line, line
        assert repr(value) in line or value in line, line
    assert fingerprint(checkpoint) == before


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("device", ["tpu", "", "CUDA"] + ([] if torch.cuda.is_available() else ["cuda"]))
def test_a_bad_device_is_named(name, device, checkpoint, corpus_dir, capsys, random_translator, tmp_path):
    line = run(name, checkpoint, corpus_dir, ["--device", device], capsys, random_translator, tmp_path)
    assert "--device" in line and (repr(device) in line or "no CUDA device" in line)


@pytest.mark.parametrize("name, result", [("faithfulness", "faithfulness.json"), ("importance", "head_importance.json"),
                                          ("corpus_stats", "head_stats.json")])
def test_a_run_that_fails_midway_leaves_the_folder_byte_identical(name, result, checkpoint, corpus_dir, capsys,
                                                                  monkeypatch):
    """The result is written only after a complete run: a failure in the middle (here, decoding) changes nothing."""
    (checkpoint / result).write_text('{"shipped": true}\n')
    before = fingerprint(checkpoint)

    def broken(*args, **kwargs):
        raise KeyboardInterrupt  # as a person stopping the run would

    monkeypatch.setattr("transformer.decoding.translator.Translator.translate_batch", broken)
    monkeypatch.setattr("transformer.corpus.scoring.translate_corpus", broken, raising=False)
    main, good, _ = COMMANDS[name]
    with pytest.raises(KeyboardInterrupt):
        main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), *good])
    assert fingerprint(checkpoint) == before


def test_a_complete_run_replaces_the_result_atomically(checkpoint, corpus_dir, capsys):
    (checkpoint / "head_stats.json").write_text('{"shipped": true}\n')
    corpus_stats.main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), "--limit", "2"])
    written = json.loads((checkpoint / "head_stats.json").read_text())
    assert written["sentences"] == 2 and "shipped" not in written
    assert not [p for p in checkpoint.iterdir() if p.name.endswith(".tmp")]


def test_write_atomically_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_atomically(target, "new \udcff")  # a lone surrogate cannot be encoded: fails mid-write
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


@pytest.mark.slow
def test_the_real_entry_point_prints_no_traceback(tmp_path):
    """As a person runs it: a fresh process, `python -m`, a bad checkpoint."""
    (tmp_path / "config.json").write_text("{not json")
    done = subprocess.run([sys.executable, "-m", "transformer.analysis.importance", "--checkpoint", str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"python -m transformer.analysis.importance: error: {tmp_path / 'config.json'}: not valid JSON "
        "(Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"]


@pytest.mark.parametrize("content, complaint", [(None, "reference alignment file is missing"),
                                                ("0-0\nzero-one\n", "line 2: 'zero-one' is not a Pharaoh link"),
                                                ("0-0\n", "has 1 lines; test_2016_flickr has"),
                                                (b"\xff\xfe0-0", "cannot be read as text")])
def test_a_missing_or_malformed_alignment_reference_is_named(content, complaint, checkpoint, corpus_dir, capsys,
                                                             tmp_path):
    reference = tmp_path / "given.pharaoh"
    if isinstance(content, bytes):
        reference.write_bytes(content)
    elif content is not None:
        reference.write_text(content)
    before = fingerprint(checkpoint)
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        alignment_eval.main(["--checkpoint", str(checkpoint), "--data-dir", str(corpus_dir), "--split",
                             "test_2016_flickr", "--reference", str(reference)])
    line = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and line.count("\n") == 0 and "given.pharaoh" in line and complaint in line, line
    assert fingerprint(checkpoint) == before


@pytest.mark.parametrize("case", ["exists", "under a file"])
def test_atlas_build_names_its_output_before_reading_anything(case, checkpoint, corpus_dir, tmp_path, capsys,
                                                              monkeypatch):
    """The atlas folder is checked first: neither the checkpoint nor the corpus is read for a build that cannot be
    written (a path under a regular file stops root as well as anyone)."""
    def read(*args, **kwargs):
        raise AssertionError("read before the output was checked")

    monkeypatch.setattr("transformer.atlas.cli.load_checkpoint", read)
    monkeypatch.setattr("transformer.atlas.cli.read_corpus", read)
    if case == "exists":
        out, said = tmp_path / "atlas", "already exists"
        out.mkdir()
    else:
        (tmp_path / "notes").write_text("a file")
        out, said = tmp_path / "notes" / "atlas", "is a file, not a folder"
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        atlas_main(["build", str(checkpoint), str(corpus_dir), str(out), "--sentences", "4"])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and str(out) in err and said in err, err
