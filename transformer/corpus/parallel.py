"""Reading a parallel corpus in the Multi30k layout ({split}.{lang}, one sentence per line): every problem is a
CorpusError naming the file and what to fix."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ParallelCorpus:
    source: list[str]
    target: list[str]
    source_file: Path
    target_file: Path

    def __len__(self) -> int:
        return len(self.source)


class CorpusError(ValueError):
    """A corpus file that cannot be used, with the file named and what to fix."""


def read_lines(path: Path) -> list[str]:
    if path.is_dir():
        raise CorpusError(f"{path} is a folder: a split must be a file with one sentence per line")
    if not path.is_file():
        raise CorpusError(f"{path}: corpus file is missing (each split needs {path.stem}.SRC and {path.stem}.TGT)")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise CorpusError(f"{path}: line {line} holds bytes that are not UTF-8 (byte {error.start}): "
                          "save the file as UTF-8") from None
    lines = text.rstrip("\n").split("\n")
    if lines == [""]:
        raise CorpusError(f"{path} is empty: a split needs at least one sentence")
    return lines


def read_parallel(data_dir, split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    data_dir = Path(data_dir)
    source_file, target_file = data_dir / f"{split}.{src_lang}", data_dir / f"{split}.{tgt_lang}"
    source, target = read_lines(source_file), read_lines(target_file)
    if len(source) != len(target):
        raise CorpusError(
            f"{source_file} has {len(source)} lines but {target_file} has {len(target)}: "
            "a parallel corpus needs line N of one file to translate line N of the other"
        )
    return ParallelCorpus(source, target, source_file, target_file)
