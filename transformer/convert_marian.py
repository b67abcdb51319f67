"""A Hugging Face Marian model (OPUS-MT) as one of our checkpoint folders.

    python -m transformer.convert_marian Helsinki-NLP/opus-mt-en-de checkpoints/opus-en-de   # from the Hub
    python -m transformer.convert_marian path/to/hf-folder checkpoints/opus-en-de             # from a local folder

SRC is a local folder as `MarianMTModel.save_pretrained` and `MarianTokenizer.save_pretrained` write it (config.json,
generation_config.json, model.safetensors or pytorch_model.bin, source.spm, target.spm, vocab.json), or a Hub name,
downloaded where the machine reaches the Hub. OUT gets config.json, model.safetensors, the three tokenizer files,
metrics.json (the decoding that generation_config.json asks for) and README.md, a model card naming the origin and
its license. The folder is written beside OUT under another name and renamed into place once it loads, so a failed
conversion leaves nothing at OUT.

Marian is the architecture our Transformer implements with these settings: post-norm layers without a final norm,
sinusoidal positions with sines and cosines in halves, token embeddings scaled by sqrt(d_model), SiLU ("swish")
feed-forward, <pad> as the decoder's start token, and Marian's `final_logits_bias` as the output projection's bias.
Anything else in config.json that changes the arithmetic stops the conversion with one line naming it.

Only this module and the tests import `transformers` (`pip install ".[marian]"`); the app and the package never do.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from .checkpoint import CheckpointError, save_checkpoint
from .command_line import CommandParser
from .core.config import ModelConfig
from .core.model import Transformer
from .decoding.translator import Translator
from .marian_config import (
    ConversionError,
    languages_of,
    license_of,
    model_config_of,
    read_json_object,
    recorded_decoding,
)
from .marian_tokenizer import SOURCE_FILE, TARGET_FILE, VOCAB_FILE, MarianTokenizer

TOKENIZER_FILES = (SOURCE_FILE, TARGET_FILE, VOCAB_FILE)
def load_hf_model(folder: Path):
    """MarianMTModel from `folder`, float32, every tensor read from the file (none left at its random start)."""
    from transformers import MarianMTModel  # noqa: PLC0415  (only the converter needs transformers)
    from transformers.utils import logging as hf_logging  # noqa: PLC0415

    weights = [folder / name for name in ("model.safetensors", "pytorch_model.bin") if (folder / name).is_file()]
    if not weights:
        raise ConversionError(f"{folder}: no weights file (model.safetensors or pytorch_model.bin)")
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        model, info = MarianMTModel.from_pretrained(folder, local_files_only=True, output_loading_info=True,
                                                    dtype=torch.float32)
    except Exception as error:  # noqa: BLE001  a file transformers cannot read, whatever it raises, is one line
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConversionError(f"{weights[0]}: cannot be read ({first})") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    # the sinusoidal tables are computed, not stored; any other missing tensor would stay random
    missing = [k for k in info.get("missing_keys", []) if "embed_positions" not in k]
    if missing or info.get("mismatched_keys"):
        what = (f"missing tensors {sorted(missing)[:3]}" if missing
                else f"tensors of another shape {info['mismatched_keys'][:3]}")
        raise ConversionError(f"{weights[0]}: does not match config.json ({what})")
    return model.eval()


def our_state(hf_model, config: ModelConfig) -> dict[str, torch.Tensor]:
    """Marian's tensors under our names: q, k and v stacked into `in_proj`, the layer norms by the sub-layer they
    follow, `final_logits_bias` as the output projection's bias."""
    hf = {name: tensor.detach().float() for name, tensor in hf_model.state_dict().items()}
    state = {"src_embed.embedding.weight": hf["model.encoder.embed_tokens.weight"],
             "generator.bias": hf["final_logits_bias"].reshape(-1)}
    # a shared or tied matrix is one tensor under each of its names, as our state dict lists it
    state["tgt_embed.embedding.weight"] = hf["model.encoder.embed_tokens.weight" if config.share_embeddings
                                             else "model.decoder.embed_tokens.weight"]
    state["generator.weight"] = state["tgt_embed.embedding.weight"] if config.tie_output else hf["lm_head.weight"]

    def attention(ours: str, theirs: str) -> None:
        for field in ("weight", "bias"):
            state[f"{ours}.in_proj.{field}"] = torch.cat([hf[f"{theirs}.{p}_proj.{field}"] for p in "qkv"])
            state[f"{ours}.out_proj.{field}"] = hf[f"{theirs}.out_proj.{field}"]

    def copy(ours: str, theirs: str) -> None:
        for field in ("weight", "bias"):
            state[f"{ours}.{field}"] = hf[f"{theirs}.{field}"]

    for i in range(config.encoder.layers):
        ours, theirs = f"encoder_layers.{i}", f"model.encoder.layers.{i}"
        attention(f"{ours}.self_attention", f"{theirs}.self_attn")
        copy(f"{ours}.attention_residual.norm", f"{theirs}.self_attn_layer_norm")
        copy(f"{ours}.feed_forward.fc1", f"{theirs}.fc1")
        copy(f"{ours}.feed_forward.fc2", f"{theirs}.fc2")
        copy(f"{ours}.feed_forward_residual.norm", f"{theirs}.final_layer_norm")
    for i in range(config.decoder.layers):
        ours, theirs = f"decoder_layers.{i}", f"model.decoder.layers.{i}"
        attention(f"{ours}.self_attention", f"{theirs}.self_attn")
        copy(f"{ours}.self_attention_residual.norm", f"{theirs}.self_attn_layer_norm")
        attention(f"{ours}.cross_attention", f"{theirs}.encoder_attn")
        copy(f"{ours}.cross_attention_residual.norm", f"{theirs}.encoder_attn_layer_norm")
        copy(f"{ours}.feed_forward.fc1", f"{theirs}.fc1")
        copy(f"{ours}.feed_forward.fc2", f"{theirs}.fc2")
        copy(f"{ours}.feed_forward_residual.norm", f"{theirs}.final_layer_norm")
    return state


def shared_as_loaded(hf_model, config: ModelConfig) -> ModelConfig:
    """`config` with the sharing the loaded weights have: which matrices transformers ties depends on its version and
    on both flags (share_encoder_decoder_embeddings without tie_word_embeddings gives three matrices in 5.x), so the
    weights, not the flags, say whether one matrix serves both embeddings and the output projection."""
    model = hf_model.model
    encoder, decoder = model.encoder.embed_tokens.weight, model.decoder.embed_tokens.weight
    output = hf_model.lm_head.weight
    return replace(config, share_embeddings=encoder.shape == decoder.shape and torch.equal(encoder, decoder),
                   tie_output=torch.equal(decoder, output))


def model_card(name: str, origin: dict, config: ModelConfig, decoding: dict, parameters: int) -> str:
    return "\n".join([
        f"# {name}", "",
        f"A Marian (OPUS-MT) translation model, {origin['languages']['src']} → {origin['languages']['tgt']}, converted "
        f"from Hugging Face `{origin['source']}` by `python -m transformer.convert_marian` (transformers "
        f"{origin['transformers']}).", "",
        f"- **License**: {origin['license']} (the original model's; see its model card for attribution).",
        f"- **Architecture**: post-norm, {config.stacks_text()} ({config.activation}), d_model {config.d_model}, "
        f"sinusoidal positions (halves "
        f"layout), vocabulary {config.tgt_vocab_size:,}, {parameters:,} parameters.",
        f"- **Recorded decoding** (from generation_config.json): {json.dumps(decoding)}.",
        "- **Equivalence**: tests/test_marian.py holds this conversion's logits, greedy output, tokenizer and "
        "attention equal to Hugging Face's on random Marian models.", "",
    ])


def resolve_source(src: str, work: Path, tokenizer_files=TOKENIZER_FILES) -> Path:
    """SRC as a folder: itself, or the Hub model of that name downloaded into `work` (its config, weights, model card
    and `tokenizer_files`)."""
    folder = Path(src)
    if folder.is_dir():
        return folder
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", src):
        raise ConversionError(f"{src}: no such folder, and not a Hub model name (owner/name)")
    try:
        from huggingface_hub import list_repo_files, snapshot_download  # noqa: PLC0415
        from huggingface_hub.utils import disable_progress_bars  # noqa: PLC0415
        from huggingface_hub.utils import logging as hub_logging  # noqa: PLC0415

        hub_logging.set_verbosity_error()  # its retries are log lines; the one line below says what failed
        disable_progress_bars()
        files = set(list_repo_files(src))
        weights = (["model.safetensors"] if "model.safetensors" in files else
                   ["model.safetensors.index.json", "model-*.safetensors"] if "model.safetensors.index.json" in files
                   else ["pytorch_model.bin"])
        wanted = ["config.json", "generation_config.json", "tokenizer_config.json", "README.md", *weights,
                  *tokenizer_files]
        return Path(snapshot_download(src, allow_patterns=wanted, local_dir=work / "download"))
    except ImportError:
        raise ConversionError(f"{src}: not a folder; downloading from the Hub needs "
                              f"`pip install \".[marian]\"`") from None
    except Exception as error:  # noqa: BLE001  offline, unknown repository, refused: one line either way
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ConversionError(f"{src}: not a folder, and the Hugging Face Hub did not provide it ({first})") from None


def convert(src: str, out, source_lang: str | None = None, target_lang: str | None = None,
            license: str | None = None) -> Path:
    """Converts SRC (a folder or a Hub name) into the checkpoint folder `out`, which must not exist yet."""
    import transformers  # noqa: PLC0415

    out = Path(out)
    if out.exists():
        raise ConversionError(f"{out}: already exists; give a new folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.converting-", dir=out.parent))
    try:
        folder = resolve_source(src, work)
        for name in TOKENIZER_FILES:
            if not (folder / name).is_file():
                raise ConversionError(f"{folder / name}: file is missing (Marian's tokenizer needs "
                                      f"{', '.join(TOKENIZER_FILES)})")
        hf_config = read_json_object(folder / "config.json")
        tokenizer_settings = folder / "tokenizer_config.json"
        if tokenizer_settings.is_file() and read_json_object(tokenizer_settings).get("separate_vocabs"):
            raise ConversionError(f"{tokenizer_settings}: unsupported separate_vocabs=true (one shared vocab.json)")
        try:
            tokenizer = MarianTokenizer.load(folder)
        except (FileNotFoundError, ValueError) as error:
            raise ConversionError(str(error)) from None
        config = model_config_of(hf_config, folder / "config.json", tokenizer.vocabulary)
        generation_file = folder / "generation_config.json"
        generation = read_json_object(generation_file) if generation_file.is_file() else hf_config
        decoding = recorded_decoding(generation, config, generation_file)
        languages = languages_of(src, folder, source_lang, target_lang)
        hf_model = load_hf_model(folder)
        config = shared_as_loaded(hf_model, config)
        model = Transformer(config)
        model.load_state_dict(our_state(hf_model, config))
        origin = {"source": src, "license": license_of(folder, license), "languages": languages,
                  "transformers": transformers.__version__, "architecture": "MarianMTModel"}
        staging = work / "checkpoint"
        tokenizer_config = {"type": "marian", "files": list(TOKENIZER_FILES), "vocab_size": tokenizer.vocab_size,
                            "pad_id": tokenizer.pad_id, "unk_id": tokenizer.unk_id, "eos_id": tokenizer.eos_id,
                            "decoder_start_id": config.decoder_start_id}
        save_checkpoint(staging, model, [folder / name for name in TOKENIZER_FILES],
                        {"languages": languages, "tokenizer": tokenizer_config, "origin": origin},
                        {"origin": origin, "parameters": model.num_parameters(), "decoding": decoding})
        (staging / "README.md").write_text(model_card(out.name, origin, config, decoding, model.num_parameters()),
                                           encoding="utf-8")
        return placed(staging, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def placed(staging: Path, out: Path) -> Path:
    """`staging` renamed to `out` once it loads as our checkpoint folder, so a failed conversion leaves nothing at
    `out`; a ConversionError saying why it does not load."""
    try:
        Translator.from_pretrained(staging)
    except CheckpointError as error:
        raise ConversionError(f"the converted folder does not load: {error}") from None
    staging.rename(out)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="python -m transformer.convert_marian",
        description="Convert a Hugging Face Marian (OPUS-MT) model into an Attention Explorer checkpoint folder.")
    parser.add_argument("src", metavar="SRC", help="a local Hugging Face Marian folder, or a Hub name such as "
                                                   "Helsinki-NLP/opus-mt-en-de (needs the network)")
    parser.add_argument("out", metavar="OUT", help="the checkpoint folder to write (must not exist), e.g. "
                                                   "checkpoints/opus-en-de")
    parser.add_argument("--source-lang", help="source language code (default: tokenizer_config.json, else the name)")
    parser.add_argument("--target-lang", help="target language code (default: tokenizer_config.json, else the name)")
    parser.add_argument("--license", help="the license the model card names (default: the source README.md's)")
    return parser


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    out = converted(parser, args.out, lambda: convert(args.src, args.out, args.source_lang, args.target_lang,
                                                      args.license))
    print(f"wrote {out}")


def converted(parser: argparse.ArgumentParser, out: str, conversion) -> Path:
    """`conversion()`'s folder; every failure one line through `parser.error` (exit status 2), leaving no folder."""
    try:
        return conversion()
    except ImportError:
        parser.error('converting needs transformers: pip install ".[marian]"')
    except ConversionError as error:
        parser.error(str(error))
    except OSError as error:  # OUT's parent is a file, its folder read-only, the disk full: nothing was written
        parser.error(f"{error.filename or out}: {error.strerror or error}")
    except Exception as error:  # noqa: BLE001  (any other failure is still one line, and leaves no folder)
        parser.error(f"conversion failed: {type(error).__name__}: {(str(error).splitlines() or [''])[0]}")


if __name__ == "__main__":
    main()
