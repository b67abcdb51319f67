"""Sequence-level knowledge distillation end to end on tiny data, on the CPU: scripts/distill_gpu.sh trains two tiny
teachers and has them translate a two-corpus mix; the files it leaves are checked against an independent decoding;
a student folder is built from them and a student stopped and resumed ends where one trained straight through ends.
Also: the winners-only beam search picks what the beam strategy picks, a distillation cut short leaves usable
files and continues, and the script refuses a machine without CUDA and a mix without its files."""
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer import ModelConfig, expected_parameter_count
from transformer import train as train_cli
from transformer.decoding.batch_beam import beam_search_ids
from transformer.decoding.strategies.beam import beam_search
from transformer.decoding.translator import Translator
from transformer.training import distill_cli
from transformer.training.distill import distill, mix_jobs, teacher_record
from transformer.training.distill_shards import LineShard, ShardError, read_lines
from transformer.training.distill_student import build_student_folder
from transformer.training.model_card import model_card
from transformer.training.train_args import build_parser

from .conftest import ROOT, write_corpus

SCRIPT = ROOT / "scripts" / "distill_gpu.sh"
SPLITS = {"tatoeba": (("train", 40), ("val", 6), ("test", 4)),
          "multi30k": (("train", 20), ("val", 4), ("test_2016_flickr", 3))}


def run_script(*args, **env) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHON": sys.executable, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env=environment)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread in this process, as in the script's: tiny models decode many times faster so on a shared
    machine (two threads wait on each other at every small operation), and the student's losses are exact."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("corpora")
    for offset, (name, sizes) in enumerate(SPLITS.items()):
        # another seed per corpus, so the two corpora differ
        write_corpus(folder / name, tuple((split, n + offset) for split, n in sizes))
    return folder


@pytest.fixture(scope="module")
def pipeline(corpora, tokenizer_file, tmp_path_factory) -> dict:
    """One run of the GPU script on the CPU with tiny teachers: its output and work folders."""
    out, work = tmp_path_factory.mktemp("distilled"), tmp_path_factory.mktemp("work")
    teacher = (f"--tokenizer {tokenizer_file} --d-model 16 --n-heads 2 --n-layers 1 --d-ff 32 --max-len 32 "
               "--max-tokens 400 --epochs 2 --lr 3e-3 --warmup 5 --average 1 --threads 1")
    result = run_script("--device", "cpu", "--corpora", str(corpora), "--out", str(out), "--work", str(work),
                        TEACHER_FLAGS=teacher, TRANSLATE_FLAGS="--chunk 16 --threads 1")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return {"out": out, "work": work, "stdout": result.stdout}


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
def test_the_script_leaves_both_directions_translated_in_few_small_files(pipeline, corpora):
    out = pipeline["out"]
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == ["de-en/multi30k.train.en.gz", "de-en/tatoeba.train.en.gz", "de-en/teacher.json",
                     "en-de/multi30k.train.de.gz", "en-de/tatoeba.train.de.gz", "en-de/teacher.json"]
    assert all((out / f).stat().st_size <= 16 * 2**20 for f in files)
    for pair in ("en-de", "de-en"):
        src, tgt = pair.split("-")
        teacher_folder = pipeline["work"] / f"teacher-{pair}"
        record = json.loads((out / pair / "teacher.json").read_text())
        metrics = json.loads((teacher_folder / "metrics.json").read_text())
        assert record["languages"] == {"src": src, "tgt": tgt}
        assert record["teacher"]["scores"] == metrics["scores"]  # val and each corpus's test, beam
        assert set(record["teacher"]["scores"]) == {"val", "tatoeba/test", "multi30k/test_2016_flickr"}
        assert record["teacher"]["training"]["command"] == metrics["training"]["command"]
        assert record["translation"]["complete"] and record["translation"]["beam_size"] == 4
        teacher = Translator.from_pretrained(teacher_folder)
        for name in SPLITS:
            sources = (corpora / name / f"train.{src}").read_text().splitlines()
            # gzip's own reader, and the beam strategy's translations: independent of the code under test
            lines = gzip.decompress((out / pair / f"{name}.train.{tgt}.gz").read_bytes()).decode().splitlines()
            assert len(lines) == len(sources), (pair, name)
            expected = [t.text for t in teacher.translate_batch(sources[:8], strategy="beam", beam_size=4,
                                                                length_penalty=record["translation"]["length_penalty"])]
            assert lines[:8] == expected, (pair, name)
    assert "[teacher-en-de] epoch 1:" in pipeline["stdout"] and "[translate-de-en] de-en: all translated" in \
        pipeline["stdout"]


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
def test_the_winners_only_search_chooses_as_the_beam_strategy(pipeline, random_translator):
    trained = Translator.from_pretrained(pipeline["work"] / "teacher-en-de")
    sentences = ["a man rides a red bike .", "two dogs .", "the girl plays in the park with a blue ball .", "water"]
    # the random model runs into its length limits, the trained one ends its hypotheses with EOS
    for translator in (random_translator, trained):
        sources = [translator.source_ids(s)[0] for s in sentences]
        for beam_size, alpha in ((1, 0.0), (3, 0.6), (4, 1.5)):
            want = [d.token_ids for d in beam_search(translator.model, sources, beam_size, alpha)]
            assert beam_search_ids(translator.model, sources, beam_size, alpha) == want, (beam_size, alpha)


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
def test_a_distillation_cut_short_is_usable_and_continues(pipeline, tmp_path):
    teacher = Translator.from_pretrained(pipeline["work"] / "teacher-en-de")
    mix = pipeline["work"] / "mix"

    def stop_after_two_chunks(job, lines):
        if sum(j.shard.lines for j in jobs) >= 16:
            raise KeyboardInterrupt

    jobs = mix_jobs(mix, tmp_path, "en", "de")
    with pytest.raises(KeyboardInterrupt):
        distill(teacher, jobs, {"teacher": teacher_record(teacher, "t")}, tmp_path, chunk=8,
                progress=stop_after_two_chunks)
    done = {job.name: job.shard.lines for job in jobs}
    assert done == {"tatoeba": 8, "multi30k": 8}  # one chunk each: the corpus least far along goes next
    record = json.loads((tmp_path / "teacher.json").read_text())
    assert {n: c["translated"] for n, c in record["translation"]["corpora"].items()} == done
    assert not record["translation"]["complete"]
    jobs = mix_jobs(mix, tmp_path, "en", "de")  # a second run continues
    distill(teacher, jobs, record, tmp_path, chunk=8)
    for name in SPLITS:
        assert read_lines(tmp_path / f"{name}.train.de.gz") == read_lines(pipeline["out"] / "en-de" /
                                                                          f"{name}.train.de.gz")


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
def test_translations_by_another_teacher_are_not_continued(pipeline, tmp_path, capsys):
    out = tmp_path / "en-de"
    shutil.copytree(pipeline["out"] / "en-de", out)
    record = json.loads((out / "teacher.json").read_text())
    record["teacher"]["training"]["updates"] += 1  # as a teacher trained anew would differ
    (out / "teacher.json").write_text(json.dumps(record))
    with pytest.raises(SystemExit):
        distill_cli.main(["translate", "--teacher", str(pipeline["work"] / "teacher-en-de"), "--mix",
                          str(pipeline["work"] / "mix"), "--out", str(out)])
    assert "holds translations by another teacher" in capsys.readouterr().err


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
def test_a_bad_out_or_a_torn_teacher_json_is_one_line_naming_it_before_any_work(pipeline, corpora, tmp_path, capsys):
    """A file given as --out, a folder that cannot be made, and a teacher.json cut off mid-write end the command
    with one line (exit status 2) that names the path, for both subcommands; nothing is written."""
    teacher, mix = str(pipeline["work"] / "teacher-en-de"), str(pipeline["work"] / "mix")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    torn = tmp_path / "torn"
    shutil.copytree(pipeline["out"] / "en-de", torn)
    (torn / "teacher.json").write_text((torn / "teacher.json").read_text()[:40])
    cases = [
        (["translate", "--teacher", teacher, "--mix", mix, "--out", str(a_file)], f"--out {a_file} is a file"),
        (["translate", "--teacher", teacher, "--mix", mix, "--out", str(a_file / "out")],
         f"cannot be made: {a_file} is a file, not a folder"),
        (["student", "--distilled", str(pipeline["out"] / "en-de"), "--corpora", str(corpora), "--out", str(a_file)],
         f"--out {a_file} is a file"),
        (["translate", "--teacher", teacher, "--mix", mix, "--out", str(torn)],
         f"{torn / 'teacher.json'}: not valid JSON"),
        (["student", "--distilled", str(torn), "--corpora", str(corpora), "--out", str(tmp_path / "student")],
         f"{torn / 'teacher.json'}: not valid JSON"),
    ]
    for argv, complaint in cases:
        with pytest.raises(SystemExit) as exit_status:
            distill_cli.main(argv)
        error = capsys.readouterr().err
        last = error.strip().splitlines()[-1]
        assert exit_status.value.code == 2 and complaint in last and "Traceback" not in error, (argv, error)
    assert a_file.read_text() == "mine" and not (tmp_path / "student").exists()


def test_a_torn_chunk_is_cut_off_and_the_file_stays_gzip(tmp_path):
    path = tmp_path / "x.gz"
    shard = LineShard(path)
    shard.append(["eins", "zwei"])
    shard.append(["drei\nvier"])  # a line break inside a translation would shift every later line
    whole = path.read_bytes()
    path.write_bytes(whole + gzip.compress(b"fuenf\n")[:-6])  # a member cut off while written
    assert read_lines(path) == ["eins", "zwei", "drei vier"]
    resumed = LineShard(path)
    assert resumed.lines == 3 and path.read_bytes() == whole
    resumed.append(["sechs"])
    assert gzip.decompress(path.read_bytes()).decode() == "eins\nzwei\ndrei vier\nsechs\n"
    with pytest.raises(ShardError, match="would grow past"):
        LineShard(path, limit=len(path.read_bytes()) + 10).append(["sieben " * 50])


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
@pytest.mark.parametrize("with_references", [False, True])
def test_the_student_folder_pairs_each_source_with_its_translation(pipeline, corpora, tmp_path, with_references):
    folder = build_student_folder(pipeline["out"] / "en-de", corpora, tmp_path, with_references) and tmp_path
    want_en, want_de = [], []
    for name, repeat in (("tatoeba", 1), ("multi30k", 2)):
        sources = (corpora / name / "train.en").read_text().splitlines()
        targets = gzip.decompress((pipeline["out"] / "en-de" / f"{name}.train.de.gz").read_bytes()).decode()
        references = (corpora / name / "train.de").read_text().splitlines()
        pairs = list(zip(sources, targets.splitlines())) + (list(zip(sources, references)) if with_references else [])
        want_en += [s for _ in range(repeat) for s, _ in pairs]
        want_de += [t for _ in range(repeat) for _, t in pairs]
    assert (folder / "train.en").read_text().splitlines() == want_en
    assert (folder / "train.de").read_text().splitlines() == want_de
    val = [line for name in SPLITS for line in (corpora / name / "val.de").read_text().splitlines()]
    assert (folder / "val.de").read_text().splitlines() == val  # selected on human references
    recipe = json.loads((folder / "mix.json").read_text())
    assert [(c["name"], c["repeat"], c["val"]) for c in recipe["corpora"]] == [("tatoeba", 1, [0, 6]),
                                                                               ("multi30k", 2, [6, 11])]


@pytest.mark.slow  # the tiny teachers come from the script's run: four training and translating processes
def test_a_student_stopped_and_resumed_ends_as_one_trained_straight_through(pipeline, corpora, tmp_path):
    data = build_student_folder(pipeline["out"] / "en-de", corpora, tmp_path / "data") and tmp_path / "data"
    common = ["--data-dir", str(data), "--src", "en", "--tgt", "de", "--max-tokens", "300", "--epochs", "1",
              "--threads", "1", "--warmup", "5", "--average", "1", "--beam-size", "1"]
    warm = ["--init-from", str(pipeline["work"] / "teacher-en-de")]
    train_cli.main([*common, *warm, "--out", str(tmp_path / "straight")])
    train_cli.main([*common, *warm, "--out", str(tmp_path / "split"), "--max-updates", "3"])
    train_cli.main(["--resume", str(tmp_path / "split"), "--max-updates", "1000"])
    states = [json.loads((tmp_path / run / "resume" / "state.json").read_text())["result"]
              for run in ("straight", "split")]
    assert states[0]["updates"] == states[1]["updates"] > 3 and states[0]["epoch"] == 2  # the epoch, past the stop
    assert states[0]["update_losses"] == states[1]["update_losses"]  # exact: one thread, the same batches
    weights = [load_file(str(tmp_path / run / "model.safetensors")) for run in ("straight", "split")]
    for name, tensor in weights[0].items():
        assert torch.equal(tensor, weights[1][name]), name
    metrics = json.loads((tmp_path / "split" / "metrics.json").read_text())
    assert metrics["data"]["distilled"]["teacher"]["scores"]["val"]["bleu"] is not None
    assert metrics["earlier_stages"][-1]["checkpoint"].endswith("teacher-en-de")
    card = model_card(metrics, "student")
    assert "a teacher's translations as targets (sequence-level knowledge distillation" in card
    assert "`bash scripts/distill_gpu.sh` remakes them on a GPU and `python -m transformer.distill student" in card


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_script_refuses_a_machine_without_cuda_unless_told_cpu(corpora, tmp_path):
    result = run_script("--corpora", str(corpora), "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == ["error: no CUDA device torch can use on this machine: run on a GPU machine, "
                                          "or add --device cpu for a test run"]
    assert not (tmp_path / "out").exists()


def test_the_script_refuses_a_mix_without_its_files_one_line_each(tmp_path):
    write_corpus(tmp_path / "tatoeba", (("train", 3), ("val", 2)))  # no test split
    (tmp_path / "tatoeba" / "val.de").unlink()
    result = run_script("--device", "cpu", "--corpora", str(tmp_path), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    missing = [f"{tmp_path}/{name}" for name in ("tatoeba/val.de", "tatoeba/test.en", "tatoeba/test.de")] + [
        f"{tmp_path}/multi30k/{split}.{language}" for split in ("train", "val", "test_2016_flickr")
        for language in ("en", "de")]
    assert result.stderr.splitlines() == [f"error: missing {path} (the corpus mix needs it)" for path in missing]


def test_the_teachers_are_the_pilots_50m_shape_on_the_shipped_tokenizer():
    text = SCRIPT.read_text()
    flags = re.search(r'teacher_flags=\$\{TEACHER_FLAGS:-"(.*?)"\}', text, re.S).group(1).replace("\\\n", "")
    args = build_parser().parse_args([*shlex.split(flags), "--out", "x"])
    assert (args.d_model, args.n_layers, args.n_heads, args.d_ff) == (512, 6, 8, 2048)
    assert (args.max_tokens, args.lr, args.warmup) == (24000, 8e-4, 600)
    assert (ROOT / args.tokenizer).read_bytes() == (ROOT / "checkpoints" / "de-en" / "spm.model").read_bytes()
    shape = ModelConfig(src_vocab_size=12000, tgt_vocab_size=12000, d_model=512, n_heads=8, n_layers=6, d_ff=2048,
                        share_embeddings=True, tie_output=True)  # as train builds it: one table, tied output
    assert 50e6 < expected_parameter_count(shape) < 51e6  # the "50M model"
