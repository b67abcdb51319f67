"""The float16 kernel's sources, the digest that keys their build, and the copies the build reads.

Why copies: ninja rebuilds what was compiled from another path, so two copies of the package on one machine (a
checkout and a pip install, two checkouts) rebuilt the kernel in turn, 45-65 s of CPU each. The build folder is
named by the digest of the sources and the header (kernel_build.build_folder), and the build reads copies staged at
one path per digest and user, the same for every copy of the package: each copy of the same sources finds the
other's build, and changed sources get a build of their own.
"""
from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

# the kernel, every decoder layer's step on it (fused_step.cpp), and their shared matrix product (half_linear.h);
# torch rebuilds when a source's text changes, so the header's text is part of the build's name
SOURCES = [Path(__file__).with_name(name) for name in ("half_linear.cpp", "fused_step.cpp")]
HEADER = Path(__file__).with_name("half_linear.h")
EXTENSION = "attention_explorer_half_linear"
# the staged copies' time (2000-01-01): older than any build, so that a copy staged again (the temporary folder
# emptied) is never newer than the objects made from the same bytes, and ninja finds nothing to redo
STAGED_TIME = 946_684_800


def header_digest() -> str:
    return hashlib.sha256(HEADER.read_bytes()).hexdigest()[:16]


@functools.cache
def source_digest() -> str:
    """The sources' and the header's names and bytes, hashed: the key of their build."""
    digest = hashlib.sha256()
    for path in [*SOURCES, HEADER]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def staged_sources() -> list[Path]:
    """The sources the build reads: copies of SOURCES and HEADER at one path per digest and user (in the system's
    temporary folder), written where missing or different, atomically, with the fixed time STAGED_TIME."""
    folder = Path(tempfile.gettempdir()) / f"{EXTENSION}-sources-{os.getuid()}-{source_digest()}"
    folder.mkdir(parents=True, exist_ok=True)  # an OSError names the path (kernel_build.folder_errors says it)
    for path in [*SOURCES, HEADER]:
        copy, data = folder / path.name, path.read_bytes()
        if copy.is_file() and copy.read_bytes() == data:
            continue
        temporary = folder / f".{path.name}.{os.getpid()}"
        temporary.write_bytes(data)
        os.utime(temporary, (STAGED_TIME, STAGED_TIME))
        os.replace(temporary, copy)
    return [folder / path.name for path in SOURCES]
