"""What serving a converted OPUS-MT model costs: a random Marian model of opus-mt-en-de's shape (6 + 6 layers, d_model
512, 8 heads, feed-forward 2048, SiLU, 58,101 shared and tied embeddings), converted by transformer.convert_marian,
then through our greedy decoding and through Hugging Face's generate(num_beams=1) on the same weights and sentences.
Prints JSON.

    python bench/bench_marian.py [--sentences 5] [--rounds 3] [--tokens 32] [--threads 1] [--seed 0]

Each side runs in a process of its own (so its memory is its own): it loads the model (load_s: ours
Translator.from_pretrained of the converted folder; theirs MarianMTModel.from_pretrained of the Hugging Face
folder), reads its resident memory (rss_mb after loading, peak_rss_mb at the end), decodes every sentence once to
warm up, then `--rounds` rounds over them (rss_after_decoding_mb: every weight touched; theirs memory-maps its
weights file, so rss_mb after loading counts only what loading touched); ms_per_token is the median over rounds of
the round's time over the tokens it produced. Both produce exactly `--tokens` tokens per sentence: the random model
practically never produces </s> (1 in 58,101), ours stops at its length limit, theirs at max_new_tokens (with
opus-mt's forced </s> as its last token). Ours is `Translator.translate(strategy="greedy")`, which also keeps each
step's top-10 candidates for the views; the Marian model's post-norm layers run through the Python step (the
compiled kernel runs pre-norm ones). "same_tokens_before_the_last" checks that both produced the same ids but the
last (opus-mt's forced_eos_token_id makes theirs </s> there). The conversion's time (convert_s) and the checkpoint
folder's size are reported too. Needs transformers (pip install ".[marian]").
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPE = dict(vocab_size=58101, decoder_vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6,
             encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
             max_position_embeddings=512, activation_function="swish", scale_embedding=True, pad_token_id=58100,
             decoder_start_token_id=58100, eos_token_id=0, forced_eos_token_id=0, share_encoder_decoder_embeddings=True,
             tie_word_embeddings=True)
SENTENCES = ["A man in a blue jacket is riding a bicycle down the street.", "Two dogs are running through the snow.",
             "The children play football in the park after school.", "She reads a book while the train waits.",
             "How are you?", "We will meet at the old bridge tomorrow morning.", "The weather is nice today."]


def memory_mb(field: str = "VmRSS") -> float:
    """This process's resident memory (VmRSS) or its peak (VmHWM, which unlike ru_maxrss starts afresh at exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def write_hf_folder(folder: Path, seed: int) -> None:
    """The random model, saved with save_pretrained, and a tokenizer of the same vocabulary size: SentencePiece models
    trained on the sentences above, their pieces first in vocab.json, filler pieces up to 58,100, <pad> last."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(seed)
    MarianMTModel(MarianConfig(**SHAPE)).save_pretrained(folder)
    vocabulary = {"</s>": 0, "<unk>": 1}
    lines = SENTENCES * 20
    for name in ("source.spm", "target.spm"):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=100,
                                       hard_vocab_limit=False, character_coverage=1.0, minloglevel=2)
        (folder / name).write_bytes(model.getvalue())
        processor = spm.SentencePieceProcessor(model_file=str(folder / name))
        for piece in (processor.id_to_piece(i) for i in range(processor.get_piece_size())):
            if piece not in ("<unk>", "<s>", "</s>"):
                vocabulary.setdefault(piece, len(vocabulary))
    while len(vocabulary) < SHAPE["pad_token_id"]:
        vocabulary[f"▁filler{len(vocabulary)}"] = len(vocabulary)
    vocabulary["<pad>"] = SHAPE["pad_token_id"]
    (folder / "vocab.json").write_text(json.dumps(vocabulary, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    (folder / "generation_config.json").write_text(json.dumps({
        "bad_words_ids": [[58100]], "bos_token_id": 0, "decoder_start_token_id": 58100, "eos_token_id": 0,
        "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4, "pad_token_id": 58100}))


def run_side(side: str, hf_folder: Path, converted: Path, sentences: list[str], rounds: int, tokens: int,
             threads: int) -> dict:
    """One side, in this process: load, warm up, time; returns its figures and the ids it produced."""
    import torch

    torch.set_num_threads(threads)
    from transformer import Translator

    rss_before = memory_mb()
    started = time.perf_counter()
    if side == "ours":
        translator = Translator.from_pretrained(converted)
        sources = [translator.source_ids(text)[0] for text in sentences]

        def decode(index: int) -> list[int]:
            return translator.translate(sentences[index], strategy="greedy", max_length=tokens).tgt_ids
    else:
        from transformers import GenerationConfig, MarianMTModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        model = MarianMTModel.from_pretrained(hf_folder).eval()
        generation = GenerationConfig.from_pretrained(hf_folder)
        generation.update(num_beams=1, do_sample=False, max_new_tokens=tokens, max_length=None)
        sources = None

        def decode(index: int) -> list[int]:
            with torch.inference_mode():
                out = model.generate(input_ids=torch.tensor([hf_sources[index]]), generation_config=generation)
            return out[0, 1:].tolist()
    load_s = time.perf_counter() - started
    loaded_rss = memory_mb()
    if side != "ours":
        hf_sources = json.loads(os.environ["BENCH_MARIAN_SOURCES"])
    produced = [decode(i) for i in range(len(sentences))]  # warm-up, and the ids compared
    per_token = []
    for _ in range(rounds):
        started, count = time.perf_counter(), 0
        for i in range(len(sentences)):
            count += len(decode(i))
        per_token.append(1000 * (time.perf_counter() - started) / count)
    return {"load_s": round(load_s, 2), "rss_mb": round(loaded_rss, 1), "rss_before_load_mb": round(rss_before, 1),
            "rss_after_decoding_mb": round(memory_mb(), 1), "peak_rss_mb": round(memory_mb("VmHWM"), 1),
            "ms_per_token": round(statistics.median(per_token), 2),
            "ms_per_token_rounds": [round(t, 2) for t in per_token],
            "tokens_per_sentence": [len(ids) for ids in produced], "ids": produced,
            **({"sources": sources} if sources else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=5, help="how many of the built-in sentences (1-7)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds over the sentences (>= 1)")
    parser.add_argument("--tokens", type=int, default=32, help="tokens each sentence decodes (1-500)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per side (the app decodes on 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--side", choices=("ours", "theirs"), help=argparse.SUPPRESS)  # a child process's side
    parser.add_argument("--folders", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name, low, high in (("sentences", 1, len(SENTENCES)), ("rounds", 1, 100), ("tokens", 1, 500),
                            ("threads", 1, 64)):
        if not low <= getattr(args, name) <= high:
            parser.error(f"--{name} must be in [{low}, {high}], got {getattr(args, name)}")
    sentences = SENTENCES[: args.sentences]
    if args.side:
        hf_folder, converted = map(Path, args.folders)
        print(json.dumps(run_side(args.side, hf_folder, converted, sentences, args.rounds, args.tokens, args.threads)))
        return

    import torch
    import transformers

    from transformer.convert_marian import convert

    with tempfile.TemporaryDirectory() as work:
        hf_folder, converted = Path(work) / "hf", Path(work) / "converted"
        write_hf_folder(hf_folder, args.seed)
        started = time.perf_counter()
        convert(str(hf_folder), converted)
        convert_s = time.perf_counter() - started
        command = [sys.executable, __file__, "--sentences", str(args.sentences), "--rounds", str(args.rounds),
                   "--tokens", str(args.tokens), "--threads", str(args.threads), "--folders", str(hf_folder),
                   str(converted)]
        sides = {}
        env = dict(os.environ)
        for side in ("ours", "theirs"):
            result = subprocess.run([*command, "--side", side], capture_output=True, text=True, env=env, check=False)
            if result.returncode != 0:
                raise SystemExit(f"bench_marian: the {side} process failed:\n{result.stderr[-3000:]}")
            sides[side] = json.loads(result.stdout.strip().splitlines()[-1])
            if side == "ours":
                env["BENCH_MARIAN_SOURCES"] = json.dumps(sides["ours"].pop("sources"))
        folder_mb = sum(f.stat().st_size for f in converted.iterdir()) / 2**20
    # opus-mt's forced_eos_token_id makes Hugging Face's last token </s>; ours stops at the limit with its own choice
    ours_ids, their_ids = sides["ours"].pop("ids"), sides["theirs"].pop("ids")
    same = [a[:-1] for a in ours_ids] == [b[:-1] for b in their_ids]
    print(json.dumps({
        "benchmark": "bench/bench_marian.py", "shape": SHAPE, "sentences": len(sentences), "rounds": args.rounds,
        "tokens_per_sentence": args.tokens, "threads": args.threads, "convert_s": round(convert_s, 2),
        "converted_folder_mb": round(folder_mb, 1), "ours": sides["ours"], "theirs_hf_generate": sides["theirs"],
        "theirs_over_ours_ms_per_token": round(sides["theirs"]["ms_per_token"] / sides["ours"]["ms_per_token"], 2),
        "same_tokens_before_the_last": same, "torch": torch.__version__, "transformers": transformers.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.processor() or platform.platform()}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }, indent=2))


if __name__ == "__main__":
    main()
