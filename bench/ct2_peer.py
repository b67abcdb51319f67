"""CTranslate2 as a peer in bench_decoding.py: the same random-weight MarianMTModel, saved with save_pretrained and
converted by CTranslate2's own `TransformersConverter`, once in float32 and once in int8, and run through
`ctranslate2.Translator.translate_batch` with the output length forced to ours.

The converter loads the Marian with the `AutoTokenizer` beside it and takes the vocabulary, EOS and UNK from it,
so a word-level tokenizer of placeholder tokens is written next to the weights (offline: no download, no
sentencepiece model). Its Marian loader assumes Marian's own layout, where <pad> is the last id and the decoder
starts from a zero embedding: it drops the last vocabulary entry and the last row of the tied embedding and output
projection, whatever that entry is, and always starts the decoder from zeros. So the last placeholder is named
<pad>, and the converted model has one vocabulary row fewer than ours (11,999 of 12,000) and starts decoding from
zeros rather than from the BOS embedding the Hugging Face Marian here uses: the same work per step, not the same
numbers.

It runs in its own process, after the interleaved rounds of the others (`measure_in_own_process`): torch and
CTranslate2 each
bring an OpenMP runtime whose threads spin after every call, and in one process on 2 cores the two slowed each
other 2-3x (ours' greedy 1.58 -> 3.66 ms per token, Marian's 2.96 -> 9.26, CTranslate2's own figures too).

    python bench/ct2_peer.py SAVED_MARIAN --source-length 18 --lengths '{"greedy": 18, ...}' --rounds 20 --threads 2
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID  # noqa: E402

# "int8" is CTranslate2's int8 CPU mode: int8 weights and matmuls, everything else in float32 (the loaded
# translator reports it as compute type int8_float32)
QUANTIZATIONS = ("float32", "int8")
EOS, UNK = "</s>", "<unk>"


@dataclass(frozen=True)
class Row:
    quantization: str
    beam: int
    attention: bool  # return_attention=True
    ours: str  # our row whose output length is forced on this one


ROWS = {
    "float32 greedy, attention": Row("float32", 1, True, "greedy, attention captured"),
    "float32 greedy": Row("float32", 1, False, "greedy"),
    "int8 greedy": Row("int8", 1, False, "greedy"),
    "int8 greedy, attention": Row("int8", 1, True, "greedy, attention captured"),
    "float32 beam 4, attention": Row("float32", 4, True, "beam 4, attention captured"),
    "int8 beam 4": Row("int8", 4, False, "beam 4, attention captured"),
}
# the project's targets: CTranslate2's ms per output token over ours, at least this
TARGETS = {"greedy_capture_vs_ct2_float32_attention": 1.5, "greedy_vs_ct2_int8": 1.0,
           "beam4_capture_vs_ct2_float32_attention": 1.0}
INT8_RATIOS = {  # CTranslate2's int8 rows against ours with the opt-in int8 decoding: (CTranslate2 row, our row)
    "int8_greedy": ("int8 greedy", "greedy"),
    "int8_greedy_attention_vs_capture": ("int8 greedy, attention", "greedy, attention captured"),
    "int8_beam4": ("int8 beam 4", "beam 4"),
}
RATIOS = {  # target -> (CTranslate2 row, our row)
    "greedy_capture_vs_ct2_float32_attention": ("float32 greedy, attention", "greedy, attention captured"),
    "greedy_vs_ct2_int8": ("int8 greedy", "greedy"),
    "beam4_capture_vs_ct2_float32_attention": ("float32 beam 4, attention", "beam 4, attention captured"),
}


def measure_in_own_process(marian, source_length: int, lengths: dict[str, int], seed: int, rounds: int,
                           threads: list[int]) -> tuple[dict | None, str | None]:
    """CTranslate2's medians for `ROWS`, measured in a child process (see the module's docstring) once per thread
    count in `threads` ({threads: the child's JSON}), or (None, why) without ctranslate2."""
    try:
        import ctranslate2  # noqa: F401  (only to say why, here; the child process imports it)
    except ImportError as error:
        return None, f"ctranslate2 is not installed ({error}); pip install -r bench/requirements.txt"
    measured = {}
    with tempfile.TemporaryDirectory(prefix="bench-ct2-") as work:
        marian.save_pretrained(Path(work) / "marian")
        for count in threads:
            child = subprocess.run(
                [sys.executable, __file__, str(Path(work) / "marian"), "--source-length", str(source_length),
                 "--lengths", json.dumps(lengths), "--seed", str(seed), "--rounds", str(rounds),
                 "--threads", str(count)], capture_output=True, text=True, check=False)
            if child.returncode != 0:
                raise RuntimeError(f"the CTranslate2 process ({count} threads) failed: {child.stderr[-2000:]}")
            measured[count] = json.loads(child.stdout)
    return measured, None


def child_main() -> None:
    parser = argparse.ArgumentParser(description="CTranslate2's timings for bench_decoding.py, in their own process")
    parser.add_argument("marian", type=Path, help="a MarianMTModel saved with save_pretrained")
    parser.add_argument("--source-length", type=int, required=True)
    parser.add_argument("--lengths", type=json.loads, required=True, help="our row -> its output tokens, JSON")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    import ctranslate2

    translators, vocabulary = convert_and_load(ctranslate2, args.marian, args.threads)
    runs = translation_runs(translators, source_tokens(vocabulary, args.source_length, args.seed), args.lengths)
    same = check_outputs(runs, args.lengths)
    for run in runs.values():
        run()  # warm-up
    times = {name: [] for name in runs}
    for round_number in range(args.rounds):  # every row once per round, the order reversed on odd rounds
        for name in runs if round_number % 2 == 0 else reversed(list(runs)):
            started = time.perf_counter()
            runs[name]()
            times[name].append((time.perf_counter() - started) * 1000)
    print(json.dumps({"version": ctranslate2.__version__, "threads": args.threads, "vocabulary": len(vocabulary),
                      "compute_types": {q: t.compute_type for q, t in translators.items()},
                      "int8_same_tokens_as_float32": same,
                      "median_ms": {name: round(statistics.median(v), 2) for name, v in times.items()}}))


def convert_and_load(ctranslate2, saved: Path, threads: int) -> tuple[dict, list[str]]:
    translators = {}
    with tempfile.TemporaryDirectory(prefix="bench-ct2-") as work:
        write_tokenizer(saved, json.loads((saved / "config.json").read_text())["vocab_size"])
        for quantization in QUANTIZATIONS:
            converted = Path(ctranslate2.converters.TransformersConverter(str(saved)).convert(
                str(Path(work) / quantization), quantization=quantization))
            # the translator reads model.bin into memory here, so the folder may go afterwards
            translators[quantization] = ctranslate2.Translator(str(converted), device="cpu", intra_threads=threads,
                                                               inter_threads=1)
        vocabulary = json.loads((converted / "shared_vocabulary.json").read_text(encoding="utf-8"))
    return translators, vocabulary


def placeholder_tokens(vocab_size: int) -> list[str]:
    """Token names by id: ours' special ids where ours has them, <pad> last where the converter expects it."""
    names = [f"t{index}" for index in range(vocab_size)]
    names[PAD_ID], names[UNK_ID], names[BOS_ID], names[EOS_ID] = "<blank>", UNK, "<s>", EOS
    names[-1] = "<pad>"
    return names


def write_tokenizer(directory: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    names = placeholder_tokens(vocab_size)
    word_level = Tokenizer(WordLevel({name: index for index, name in enumerate(names)}, unk_token=UNK))
    # saved with tokenizer_class PreTrainedTokenizerFast, so AutoTokenizer reads tokenizer.json, not Marian's spm
    PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token=UNK, eos_token=EOS, bos_token="<s>",
                            pad_token="<pad>").save_pretrained(directory)


def source_tokens(vocabulary: list[str], length: int, seed: int) -> list[str]:
    """Random tokens ending in EOS, like the Marian peer's ids; translate_batch adds no EOS of its own."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, len(vocabulary), (length - 1,), generator=generator).tolist()
    return [vocabulary[index] for index in ids] + [EOS]


def translation_runs(translators: dict, source: list[str], lengths: dict[str, int]) -> dict:
    def translate(row: Row):
        length = lengths[row.ours]
        # min = max decoding length: exactly our output length, EOS masked until then
        options = {"beam_size": row.beam, "return_attention": row.attention, "max_decoding_length": length,
                   "min_decoding_length": length}
        return lambda: translators[row.quantization].translate_batch([source], **options)[0]

    return {name: translate(row) for name, row in ROWS.items()}


def check_outputs(runs: dict, lengths: dict[str, int]) -> dict[str, bool]:
    """Raises unless every row produced its forced length without EOS; says whether int8 kept float32's tokens."""
    hypotheses = {}
    for name, run in runs.items():
        result, expected = run(), lengths[ROWS[name].ours]
        hypothesis = result.hypotheses[0]  # return_end_token=False: an EOS would show as a short hypothesis
        if len(hypothesis) != expected or EOS in hypothesis:
            raise RuntimeError(f"CTranslate2 {name}: {len(hypothesis)} tokens (EOS: {EOS in hypothesis}), "
                               f"expected {expected} without EOS")
        if ROWS[name].attention and len(result.attention[0]) != expected:
            raise RuntimeError(f"CTranslate2 {name}: attention for {len(result.attention[0])} of {expected} tokens")
        hypotheses[name] = hypothesis
    return {"greedy": hypotheses["int8 greedy"] == hypotheses["float32 greedy"],
            "beam 4": hypotheses["int8 beam 4"] == hypotheses["float32 beam 4, attention"]}


def report_block(measured: dict, lengths: dict[str, int], medians: dict, int8_lengths: dict[str, int]) -> dict:
    """The "ctranslate2" JSON block: its timings at each thread count (from its own processes) and the target
    ratios against ours' medians of the same run, each row at CTranslate2's fastest thread count for it; with ours'
    opt-in int8 decoding measured (`int8_lengths`, its output lengths), its int8 rows against that too."""
    by_threads = {count: run["median_ms"] for count, run in measured.items()}
    fastest = {name: min(by_threads, key=lambda count: by_threads[count][name]) for name in ROWS}
    median_ms = {name: by_threads[fastest[name]][name] for name in ROWS}
    per_token = {name: ms / lengths[ROWS[name].ours] for name, ms in median_ms.items()}
    ours_per_token = {ours: medians["ours", ours] / lengths[ours] for _, ours in RATIOS.values()}
    first = next(iter(measured.values()))
    return {
        "version": first["version"],
        "quantizations": {
            quantization: f"compute type {kind}" for quantization, kind in first["compute_types"].items()
        },
        "intra_threads_measured": sorted(measured),
        "inter_threads": 1,
        "vocabulary": first["vocabulary"],
        "process": "its own for each thread count, after the interleaved rounds of ours and Marian (two OpenMP "
        "runtimes in one process slowed both 2-3x)",
        "output_tokens": {name: lengths[row.ours] for name, row in ROWS.items()},
        "int8_same_tokens_as_float32": first["int8_same_tokens_as_float32"],
        "attention": "return_attention=True returns one weight vector over the source per output token: the first "
        "head of the last decoder layer's cross-attention (the converter's default alignment head)",
        "median_ms_by_threads": by_threads,
        "fastest_threads": fastest,
        "median_ms": median_ms,
        "ms_per_output_token": {name: round(ms, 3) for name, ms in per_token.items()},
        "ratios": {target: round(per_token[ct2] / ours_per_token[ours], 2) for target, (ct2, ours) in RATIOS.items()},
        "targets": dict(TARGETS),
        "int8_ratios": {
            name: round(per_token[ct2] / (medians["int8", ours] / int8_lengths[ours]), 2)
            for name, (ct2, ours) in INT8_RATIOS.items()
        }
        if int8_lengths
        else "ours' int8 not measured",
    }


if __name__ == "__main__":
    child_main()
