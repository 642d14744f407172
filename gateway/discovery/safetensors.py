"""A reader of the safetensors format with numpy alone, for the local encoder's weights (:mod:`.minilm`).

The format: an 8-byte little-endian header length *n*, then *n* bytes of JSON (``{name: {dtype,
shape, data_offsets: [begin, end]}, "__metadata__": {...}}``, offsets relative to the end of the
header), then the raw little-endian tensors. :func:`load` maps the file read-only (``mmap``): each
tensor is a numpy view of its bytes, so nothing is copied, pages are read when first touched and
are shared by every process that maps the same file. A header that does not fit the file (an
offset outside the data, a size that is not the shape's, an unknown dtype) raises
:class:`SafetensorsError`.
"""

from __future__ import annotations

import json
import mmap
import struct
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SafetensorsError", "Tensors", "load"]

_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U8": "u1", "BOOL": "?"}
_MAX_HEADER = 100 * 2**20


class SafetensorsError(ValueError):
    pass


class Tensors(dict[str, np.ndarray[Any, Any]]):
    """The tensors by name, and the mapping they are views of."""

    mapping: mmap.mmap

    def drop_pages(self) -> None:
        """Tell the kernel the pages read so far are not needed now (they leave this process's RSS;
        a tensor read again is paged in again from the file): after copying what is kept."""
        if hasattr(mmap, "MADV_DONTNEED"):
            self.mapping.madvise(mmap.MADV_DONTNEED)


def load(path: str | Path) -> Tensors:
    """The tensors of the file at *path*, by name: read-only views of the mapped file."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size < 8:
            raise SafetensorsError(f"{path}: not a safetensors file ({size} bytes)")
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # stays valid after the file closes
    (n,) = struct.unpack("<Q", mapped[:8])
    if not 2 <= n <= min(_MAX_HEADER, size - 8):
        raise SafetensorsError(f"{path}: a header of {n} bytes in a file of {size}")
    try:
        header = json.loads(mapped[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise SafetensorsError(f"{path}: the header is not JSON") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    data = memoryview(mapped)[8 + n:]
    out = Tensors()
    out.mapping = mapped
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = np.dtype(_DTYPES[info["dtype"]])
            shape = tuple(int(d) for d in info["shape"])
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{path}: tensor {name!r}: a bad dtype, shape or data_offsets") from None
        count = int(np.prod(shape, dtype=np.int64))
        if not 0 <= begin <= end <= len(data) or end - begin != count * dtype.itemsize or min(shape, default=0) < 0:
            raise SafetensorsError(f"{path}: tensor {name!r}: its bytes [{begin}, {end}) do not hold {shape} {dtype}")
        out[name] = np.frombuffer(data[begin:end], dtype=dtype).reshape(shape)
    return out
