"""Where a tensor's data lies in a GGUF file, read from the header alone.

``gguf.GGUFReader`` builds a numpy view of every metadata value on open, the tokenizer's 151,936 strings and its
merges among them: 9-13 s of the humanize step went to opening the scoring model's file to find one tensor (make
run, 2026-12-05), every run. This walks the same header with ``struct`` and skips the metadata it does not need,
in well under a second, and gives the same offset, type and shape as the reader (tests/test_gguf_header.py
compares the two on a written file, and the local tier on the shipped scoring model).

Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (little-endian, versions 2 and 3).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

# Fixed-size metadata value types (GGUFValueType) and their sizes in bytes; 8 is a string, 9 an array.
_SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32 = 8, 9, 4
DEFAULT_ALIGNMENT = 32


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type: int  # GGMLQuantizationType's value
    dims: tuple[int, ...]  # as stored: the row width (ne0) first
    offset: int  # absolute, in the file


class _Cursor:
    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.at = buf, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.buf, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        n = self.take("<Q")
        self.at += n
        return bytes(self.buf[self.at - n:self.at]).decode("utf-8")

    def skip_string(self) -> None:
        n = self.take("<Q")  # (not ``self.at += self.take(…)``: that adds to ``at`` as it was before the read)
        self.at += n

    def skip_value(self, kind: int) -> None:
        if kind == _STRING:
            self.skip_string()
        elif kind == _ARRAY:
            inner, count = self.take("<I"), self.take("<Q")
            if inner in _SCALAR_SIZE:
                self.at += count * _SCALAR_SIZE[inner]
            else:
                for _ in range(count):
                    self.skip_value(inner)
        elif kind in _SCALAR_SIZE:
            self.at += _SCALAR_SIZE[kind]
        else:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.at}")


def tensors(path: Path | str) -> dict[str, TensorInfo]:
    """Every tensor's name, type, dimensions and absolute data offset."""
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        cur = _Cursor(buf)
        if bytes(buf[:4]) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        cur.at = 4
        version = cur.take("<I")
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} is not supported")
        n_tensors, n_fields = cur.take("<Q"), cur.take("<Q")
        alignment = DEFAULT_ALIGNMENT
        for _ in range(n_fields):
            key, kind = cur.string(), cur.take("<I")
            if key == "general.alignment" and kind == _UINT32:
                alignment = cur.take("<I")
            else:
                cur.skip_value(kind)
        infos = []
        for _ in range(n_tensors):
            name, n_dims = cur.string(), cur.take("<I")
            dims = tuple(cur.take("<Q") for _ in range(n_dims))
            infos.append((name, cur.take("<I"), dims, cur.take("<Q")))
        start = -(-cur.at // alignment) * alignment  # the data section begins at the next multiple of alignment
        return {name: TensorInfo(name, kind, dims, start + offset) for name, kind, dims, offset in infos}
