"""Distilled targets on disk: one gzip file per corpus, grown a chunk at a time, that survives being cut off.

Each chunk of lines is appended as its own gzip member (RFC 1952 allows several in one file; `gzip -dc` and Python's
gzip module read them as one text), and flushed to disk before the next chunk is translated. A run killed while
appending leaves at most one torn member at the end: `read_lines` skips it, and `LineShard` cuts it off before
appending again, so a resumed run continues at the last complete chunk.
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path

MAX_SHARD_BYTES = 16 * 2**20  # what the GPU machine may send back per file
GZIP_WBITS = 31  # zlib's code for "a gzip header and trailer around deflate"


class ShardError(ValueError):
    """A distilled-targets file that cannot be used, named, with what to do."""


def complete_members(data: bytes) -> tuple[str, int]:
    """The text of the complete gzip members at the start of `data`, and the byte count they span."""
    texts, offset = [], 0
    while offset < len(data):
        member = zlib.decompressobj(GZIP_WBITS)
        try:
            text = member.decompress(data[offset:])
        except zlib.error:
            break
        if not member.eof:
            break  # cut off inside this member
        texts.append(text)
        offset = len(data) - len(member.unused_data)
    return b"".join(texts).decode("utf-8"), offset


def read_lines(path) -> list[str]:
    """Every complete line of a shard (none for a missing file)."""
    path = Path(path)
    if not path.is_file():
        return []
    text, _ = complete_members(path.read_bytes())
    return text.split("\n")[:-1] if text else []


class LineShard:
    """Appends lines to one gzip file, a member per call; `lines` counts the complete lines already there."""

    def __init__(self, path, limit: int = MAX_SHARD_BYTES):
        self.path, self.limit = Path(path), limit
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.is_file() else b""
        text, complete = complete_members(data)
        if complete < len(data):  # a torn member from a run cut off while writing
            with open(self.path, "r+b") as file:
                file.truncate(complete)
        self.lines = text.count("\n")
        self.size = complete

    def append(self, lines: list[str]) -> None:
        """Writes `lines` (each without a line break: one inside a translation becomes a space) as one member."""
        text = "".join(line.replace("\r", " ").replace("\n", " ") + "\n" for line in lines)
        member = gzip_member(text.encode("utf-8"))
        if self.size + len(member) > self.limit:
            raise ShardError(f"{self.path}: would grow past {self.limit:,} bytes; write fewer lines per file")
        with open(self.path, "ab") as file:
            file.write(member)
            file.flush()
            os.fsync(file.fileno())
        self.lines += len(lines)
        self.size += len(member)


def gzip_member(data: bytes) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, GZIP_WBITS)
    return compressor.compress(data) + compressor.flush()
