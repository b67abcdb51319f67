"""Decoding speed against peers: our model beside a Hugging Face MarianMTModel of the same size in one process,
interleaved rounds, medians; then that Marian converted to CTranslate2, in a process of its own. Prints JSON.

    python bench/bench_decoding.py [--checkpoint checkpoints/en-de] [--rounds 30] [--corpus-limit N] [--base COMMIT]
                                   [--no-ctranslate2] [--no-throughput]

--base COMMIT also times the package as it was at that commit (a git worktree imported as `transformer_base`),
in the same interleaved rounds, after checking that it decodes the same tokens: "before_over_ours" is what the
changes since then bought.

Ours: the shipped checkpoint through `Translator` (tokenizer, weights) and the strategy functions, ids in and
decoded ids (with their trace) out. Marian: `transformers.MarianMTModel` with random weights (--seed) and the
checkpoint's sizes (for en-de: d_model 256, 4 + 4 layers, 4 heads, feed-forward 1024, ReLU, 12,000 shared and
tied embeddings, sinusoidal positions, eager attention), `generate()` ids in, ids out. Both read an 18-token
source (ours: the sentence below through our tokenizer; Marian: random ids of the same length, ending in EOS) and
produce the SAME number of output tokens: ours decodes freely (it stops at its own EOS) and that length is
forced on Marian with min_new_tokens = max_new_tokens, which also forbids an earlier EOS; forced_eos_token_id is
off.

Figures, median milliseconds, per output token, and Marian / ours:
  greedy; greedy with attention captured (ours: the three attention probes; Marian: output_attentions=True,
  return_dict_in_generate=True); beam 4 with attention captured.
CTranslate2 (bench/ct2_peer.py): the same random-weight Marian, saved with save_pretrained beside a placeholder
word-level tokenizer and converted offline by CTranslate2's own TransformersConverter, as float32 and as int8 (its
int8 CPU mode, computed as int8_float32), then run by ctranslate2.Translator on the CPU with intra_threads 1, 2, ...
up to torch's
threads (each in a process of its own; the ratios take CTranslate2's fastest count for each row) and
inter_threads 1: translate_batch on one source of random tokens of the same length ending in EOS, with
max_decoding_length = min_decoding_length = our output length, so it produces exactly that many tokens and EOS
cannot end it earlier (checked, as for Marian). Rows: float32 greedy with and without return_attention=True, int8
greedy with and without, float32 beam 4 with attention, int8 beam 4 without. Its "ratios" are its ms per output
token over ours for the project's targets ("targets": at least that much): float32 greedy with attention over ours
greedy with capture, int8 greedy over ours greedy, float32 beam 4 with attention over ours beam 4 with capture.
Its attention is far less than our capture: one head of the last layer's cross-attention, against every head of
every layer of all three kinds. It runs in its own process after the others' rounds: in one process its OpenMP
runtime and torch's slowed each other 2-3x. --no-ctranslate2 leaves it out.
Ours with float32 weights: the same checkpoint with `use_half_weights(False)`, every layer through F.linear on
float32 weights (core/half_linear.py), same tokens checked: "float32_weights_over_ours" is what reading the
float16 copies buys. The kernel is compiled (or loaded from its cache) before anything is timed.
Ours through the Python step: the same checkpoint with `fused_decoding = False`, each decoder layer's step through
its ATen operators instead of one call of the compiled kernel (core/fused_step.py), same tokens checked:
"python_step_over_ours" is what the fused step buys; "fused_step" says whether it ran, and why not where it did not.
Ours with the opt-in int8 decoding: the same checkpoint with `int8_decoding = True` (the fused step on int8 copies
of the decoder's projections, one scale per output): other numbers, so its tokens may differ from the float16 copies'
("same_tokens_as_float16") and its figures per output token divide by its own output lengths; "int8_ratios" in the
CTranslate2 block set CTranslate2's int8 rows against it (int8 against int8). check_fused.py measures what it
changes in BLEU.
Ours only: greedy without the key/value cache (what the cache buys) and beam 4 without capture (what capture
costs), kept from the earlier version of this benchmark. Its other rows are dropped: uncached beam and
uncached capture say nothing the uncached greedy row does not, and the 30-token random-weight row was there
only because the old 15-token sentence was short; the 22-token output here is the long case.
Throughput: beam 4 over all of test_2016_flickr.en, batches of 64 sorted by length (translate_corpus, as
`python -m transformer.evaluate` does), sentences per second. The peers have none: with random weights their
output lengths would be whatever the forced length says, not a translation's.

Ours and the peers differ where their designs do: ours is pre-norm with a final LayerNorm and records the top-10
candidates of every step (and, in beam search, every expansion in its tree); Marian, and so its CTranslate2
conversion, is post-norm. Ours' beam search runs until 4 hypotheses have ended, which can take more decoder steps
than the winner's length ("decoder_steps"); Marian's and CTranslate2's run exactly the forced length.
"half_weights" says which path ours decoded on (the float16 kernel or F.linear in float32) and why. Without
transformers or ctranslate2 installed (pip install -r bench/requirements.txt) the peers that need them are
skipped, with the reason.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from base_package import base_package  # noqa: E402
from ct2_peer import measure_in_own_process, report_block  # noqa: E402  (bench/, beside this script)

from transformer import Translator  # noqa: E402
from transformer.core.fused_step import why_not_fused  # noqa: E402
from transformer.core.half_linear import KERNEL, MAX_ROWS  # noqa: E402
from transformer.core.probes import ATTENTION_KINDS  # noqa: E402
from transformer.corpus.data import default_data_dir  # noqa: E402
from transformer.corpus.scoring import translate_corpus  # noqa: E402
from transformer.decoding.strategies.beam import beam_search  # noqa: E402
from transformer.decoding.strategies.greedy import GreedySettings, decode_greedy  # noqa: E402
from transformer.tokenizer import BOS_ID, EOS_ID, PAD_ID  # noqa: E402

SENTENCE = "A young man in a red jacket is riding his bicycle along a crowded city street."  # 17 pieces + EOS
BEAM = 4
COMPARED = ("greedy", "greedy, attention captured", "beam 4, attention captured")
INT8_ROWS = (*COMPARED, "beam 4")  # the opt-in int8 decoding, beside CTranslate2's int8 rows


def marian_model(config, seed: int):
    """A MarianMTModel of our model's size with random weights, or (None, why) without transformers."""
    try:
        import transformers
        from transformers import MarianConfig, MarianMTModel
    except ImportError as error:
        return None, f"transformers is not installed ({error}); pip install -r bench/requirements.txt"
    marian_config = MarianConfig(
        vocab_size=config.src_vocab_size, d_model=config.d_model, encoder_layers=config.n_layers,
        decoder_layers=config.n_layers, encoder_attention_heads=config.n_heads, decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff, activation_function="relu",
        max_position_embeddings=config.max_len, scale_embedding=True, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, pad_token_id=PAD_ID, eos_token_id=EOS_ID, decoder_start_token_id=BOS_ID,
        forced_eos_token_id=None, attn_implementation="eager",
    )
    torch.manual_seed(seed)
    return (MarianMTModel(marian_config).eval(), transformers.__version__), None


def trainable_parameters(model: torch.nn.Module) -> int:
    """Unique trainable parameters (Marian's frozen sinusoidal tables are parameters; ours are buffers)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())


def base_runs(base, checkpoint: str, source_ids: list[int]) -> dict:
    """The compared figures for the package at --base (imported as `transformer_base`), same checkpoint and ids."""
    from transformer_base.core.probes import ATTENTION_KINDS as BASE_KINDS
    from transformer_base.decoding.strategies.beam import beam_search as base_beam
    from transformer_base.decoding.strategies.greedy import GreedySettings as BaseGreedy
    from transformer_base.decoding.strategies.greedy import decode_greedy as base_greedy

    model, sources = base.Translator.from_pretrained(checkpoint).model, [source_ids]
    return {"greedy": lambda: base_greedy(model, sources, BaseGreedy())[0],
            "greedy, attention captured": lambda: base_greedy(model, sources, BaseGreedy(), probes=BASE_KINDS)[0],
            "beam 4, attention captured": lambda: base_beam(model, sources, BEAM, probes=BASE_KINDS)[0]}


def ours_runs(model, source_ids: list[int]) -> dict:
    greedy, sources = GreedySettings(), [source_ids]
    return {
        "greedy": lambda: decode_greedy(model, sources, greedy)[0],
        "greedy, attention captured": lambda: decode_greedy(model, sources, greedy, probes=ATTENTION_KINDS)[0],
        "beam 4, attention captured": lambda: beam_search(model, sources, BEAM, probes=ATTENTION_KINDS)[0],
        "greedy, no cache": lambda: decode_greedy(model, sources, greedy, use_cache=False)[0],
        "beam 4": lambda: beam_search(model, sources, BEAM)[0],
    }


def marian_runs(model, source_length: int, lengths: dict[str, int], seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(4, model.config.vocab_size, (1, source_length), generator=generator)
    source[0, -1] = EOS_ID
    mask = torch.ones_like(source)

    def generate(name, beams, captured):
        # min = max new tokens: exactly our output length, EOS suppressed until then
        options = {"max_new_tokens": lengths[name], "min_new_tokens": lengths[name], "num_beams": beams,
                   "do_sample": False}
        if captured:
            options.update(output_attentions=True, return_dict_in_generate=True)
        return lambda: model.generate(source, attention_mask=mask, **options)

    return {"greedy": generate("greedy", 1, False),
            "greedy, attention captured": generate("greedy, attention captured", 1, True),
            "beam 4, attention captured": generate("beam 4, attention captured", BEAM, True)}


def marian_output_length(output) -> tuple[int, bool]:
    sequences = output.sequences if hasattr(output, "sequences") else output
    generated = sequences[0, 1:]  # after the decoder start token
    return generated.numel(), bool((generated == EOS_ID).any())


def half_weights_path(model) -> dict:
    """Which path our linear layers decoded on, after KERNEL.wait(): the float16 kernel or F.linear in float32."""
    layers = sum(getattr(module, "half_weight", None) is not None for module in model.modules())
    if KERNEL.module is not None and layers:
        path = (f"float16 weights through the half_linear kernel wherever a call has at most {MAX_ROWS} rows (every "
                "cached decoding step here: 1 row greedy, 4 in beam 4); F.linear in float32 for the encoder's pass "
                "over the source and uncached steps past that length")
    else:
        path = "float32 weights through F.linear: " + (KERNEL.status if KERNEL.module is None
                                                     else "no layer holds a float16 copy")
    return {"path": path, "kernel": KERNEL.status, "layers": layers}


def decoder_steps(decoded) -> int:
    """Decoder steps a search ran: its tree's depth (beam search goes on past the winner's end)."""
    return max(node.depth for node in decoded.tree) + 1 if decoded.tree else len(decoded.token_ids)


def interleaved_medians(runs: dict, rounds: int) -> dict[str, float]:
    """Every run once per round, the order reversed on odd rounds, so drift and order hit all alike."""
    for run in runs.values():
        run()  # warm-up
    times = {name: [] for name in runs}
    names = list(runs)
    for round_number in range(rounds):
        for name in names if round_number % 2 == 0 else reversed(names):
            started = time.perf_counter()
            runs[name]()
            times[name].append((time.perf_counter() - started) * 1000)
    return {name: round(statistics.median(values), 2) for name, values in times.items()}


def throughput(translator: Translator, data_dir: Path | None, split: str, limit: int | None) -> dict:
    source_file = Path(data_dir or "") / f"{split}.en"
    if data_dir is None or not source_file.is_file():
        return {"skipped": f"no {split}.en under {data_dir}; pass --data-dir"}
    sentences = source_file.read_text(encoding="utf-8").splitlines()[:limit]
    started = time.perf_counter()
    translate_corpus(translator, sentences, "beam", batch_size=64, beam_size=BEAM)
    seconds = time.perf_counter() - started
    return {"split": split, "sentences": len(sentences), "strategy": f"beam {BEAM}", "batch_size": 64,
            "seconds": round(seconds, 2), "sentences_per_s": round(len(sentences) / seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "en-de"),
                        help="our English source model (default: the shipped checkpoints/en-de)")
    parser.add_argument("--rounds", "--runs", dest="rounds", type=int, default=30,
                        help="interleaved rounds; each figure is the median over them (default: 30)")
    parser.add_argument("--data-dir", default=default_data_dir(),
                        help="Multi30k folder for the throughput run (default: ../shared/data/multi30k)")
    parser.add_argument("--split", default="test_2016_flickr", help="split translated for throughput")
    parser.add_argument("--corpus-limit", type=int, default=None,
                        help="translate only the first N sentences for throughput (default: all)")
    parser.add_argument("--no-throughput", action="store_true", help="skip the corpus throughput run")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for ours and Marian (default: torch's choice, all cores); CTranslate2 runs "
                             "with 1 up to this many and is compared at its fastest (on this project's 2-core machine "
                             "it ran 5x slower with 2)")
    parser.add_argument("--seed", type=int, default=0,
                        help="random weights of Marian (and of CTranslate2, converted from it); the peers' source ids")
    parser.add_argument("--no-ctranslate2", action="store_true",
                        help="skip the CTranslate2 peer (it is skipped anyway without transformers or ctranslate2)")
    parser.add_argument("--base", default=None,
                        help="also time the package at this git commit (the previous path), interleaved (default: off)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be at least 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    with base_package(args.base) if args.base else contextlib.nullcontext() as base:
        print(json.dumps(measure(args, base), indent=2))


def measure(args, base) -> dict:

    translator = Translator.from_pretrained(args.checkpoint)
    model = translator.model
    KERNEL.wait()  # compiled on first use (~30 s): measure the path the app settles into
    # the same checkpoint through F.linear on float32 weights: what the float16 copies buy
    float32_model = Translator.from_pretrained(args.checkpoint).model
    float32_model.use_half_weights(False)
    # the same checkpoint decoding through the Python step (every layer's ATen operators): what the fused step buys
    python_step_model = Translator.from_pretrained(args.checkpoint).model
    python_step_model.fused_decoding = False
    source_ids, _ = translator.source_ids(SENTENCE)
    ours = ours_runs(model, source_ids)
    decoded = {name: run() for name, run in ours.items()}
    lengths = {name: len(decoded[name].token_ids) for name in COMPARED}
    report = {
        "sentence": SENTENCE, "source_tokens": len(source_ids), "rounds": args.rounds,
        "cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "half_weights": half_weights_path(model),
        "fused_step": {"one row": why_not_fused(model, 1) or "every decoder layer's step in one kernel call "
                                                              "(core/fused_step.py)",
                       f"{BEAM} rows": why_not_fused(model, BEAM) or "the same"},
        "ours": {"checkpoint": str(args.checkpoint), "trainable_parameters": trainable_parameters(model),
                 "translation": translator.tokenizer.decode(decoded["greedy"].token_ids),
                 "output_tokens": lengths, "decoder_steps": {name: decoder_steps(decoded[name]) for name in COMPARED}},
    }

    built, why_not = marian_model(model.config, args.seed)
    runs = {("ours", name): run for name, run in ours.items()}
    if built:
        marian, version = built
        compared = marian_runs(marian, len(source_ids), lengths, args.seed)
        for name, run in compared.items():
            produced, ended = marian_output_length(run())
            if produced != lengths[name] or ended:
                raise RuntimeError(
                    f"Marian {name}: {produced} tokens (EOS: {ended}), expected {lengths[name]} without EOS"
                )
        runs.update({("marian", name): run for name, run in compared.items()})
        report["marian"] = {"transformers": version, "trainable_parameters": trainable_parameters(marian),
                            "attn_implementation": marian.config._attn_implementation,
                            "output_tokens": lengths, "decoder_steps": lengths}
    else:
        report["marian"] = {"skipped": why_not}

    float32_runs = ours_runs(float32_model, source_ids)
    for name in COMPARED:
        if float32_runs[name]().token_ids != decoded[name].token_ids:
            raise RuntimeError(f"float32 weights: {name} decodes other tokens than the float16 copies")
        runs["float32 weights", name] = float32_runs[name]
    report["float32 weights"] = {"what": "the same checkpoint with use_half_weights(False): F.linear, float32"}
    python_step_runs = ours_runs(python_step_model, source_ids)
    for name in COMPARED:
        if python_step_runs[name]().token_ids != decoded[name].token_ids:
            raise RuntimeError(f"python step: {name} decodes other tokens than the fused step")
        runs["python step", name] = python_step_runs[name]
    report["python step"] = {"what": "the same checkpoint with fused_decoding = False: each layer's step through "
                                     "ATen operators, on the same float16 copies"}

    # the opt-in int8 decoding (model.int8_decoding): other numbers, so its tokens may differ; per token of its own
    int8_model = Translator.from_pretrained(args.checkpoint).model
    int8_model.int8_decoding = True
    int8_why = why_not_fused(int8_model, 1)
    int8_lengths = {}
    if int8_why is None:
        int8_runs = ours_runs(int8_model, source_ids)
        int8_decoded = {name: int8_runs[name]() for name in INT8_ROWS}
        int8_lengths = {name: len(int8_decoded[name].token_ids) for name in INT8_ROWS}
        runs.update({("int8", name): int8_runs[name] for name in INT8_ROWS})
        report["int8"] = {"what": "the same checkpoint with int8_decoding = True: the fused step reads int8 copies of "
                                  "the decoder's projections, one scale per output (opt-in; check_fused.py: BLEU)",
                          "output_tokens": int8_lengths,
                          "same_tokens_as_float16": {name: int8_decoded[name].token_ids == decoded[name].token_ids
                                                     for name in COMPARED}}
    else:
        report["int8"] = {"skipped": int8_why}

    if base is not None:
        previous = base_runs(base, args.checkpoint, source_ids)
        for name, run in previous.items():
            if run().token_ids != decoded[name].token_ids:
                raise RuntimeError(f"--base {args.base}: {name} decodes other tokens than today's package")
        runs.update({("before", name): run for name, run in previous.items()})
        report["before"] = {"commit": args.base}

    medians = interleaved_medians(runs, args.rounds)
    for side in ("ours", "python step", "float32 weights", "marian", "before", "int8"):
        side_medians = {name: ms for (who, name), ms in medians.items() if who == side}
        if side_medians:
            side_lengths = int8_lengths if side == "int8" else lengths
            report[side]["median_ms"] = side_medians
            report[side]["ms_per_output_token"] = {name: round(side_medians[name] / side_lengths[name], 3)
                                                   for name in (INT8_ROWS if side == "int8" else COMPARED)}
    if args.no_ctranslate2:
        ct2, ct2_why = None, "--no-ctranslate2"
    elif not built:
        ct2, ct2_why = None, f"it converts the random-weight Marian, which needs transformers: {why_not}"
    else:  # in its own process, now that ours and Marian are done (ct2_peer.py says why)
        ct2, ct2_why = measure_in_own_process(marian, len(source_ids), lengths, args.seed, args.rounds,
                                              list(range(1, torch.get_num_threads() + 1)))
    report["ctranslate2"] = report_block(ct2, lengths, medians, int8_lengths) if ct2 else {"skipped": ct2_why}
    if built:
        report["marian_over_ours"] = {name: round(medians["marian", name] / medians["ours", name], 2)
                                      for name in COMPARED}
    report["python_step_over_ours"] = {name: round(medians["python step", name] / medians["ours", name], 2)
                                       for name in COMPARED}
    report["float32_weights_over_ours"] = {name: round(medians["float32 weights", name] / medians["ours", name], 2)
                                           for name in COMPARED}
    if base is not None:
        report["before_over_ours"] = {name: round(medians["before", name] / medians["ours", name], 2)
                                      for name in COMPARED}
    report["ours_only"] = {
        "cache_speedup_greedy": round(medians["ours", "greedy, no cache"] / medians["ours", "greedy"], 2),
        "capture_overhead_greedy_percent": round(100 * (medians["ours", "greedy, attention captured"]
                                                        / medians["ours", "greedy"] - 1), 1),
        "capture_overhead_beam_percent": round(100 * (medians["ours", "beam 4, attention captured"]
                                                      / medians["ours", "beam 4"] - 1), 1),
    }
    report["throughput"] = ({"skipped": "--no-throughput"} if args.no_throughput else
                            throughput(translator, args.data_dir, args.split, args.corpus_limit))
    return report


if __name__ == "__main__":
    main()
