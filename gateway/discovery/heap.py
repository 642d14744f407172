"""glibc's heap, told when to give memory back (the local model's and the vector store's use).

Contract: both functions do nothing on a C library other than glibc, and neither raises.

* :func:`give_back` is ``malloc_trim(0)``: the free pages of every arena's bins go back to the
  system (~1.5 ms after 6,115 tools' vectors were put). Blocks freed in the middle of a heap stay
  resident otherwise.
* :func:`fixed_thresholds` sets ``M_MMAP_THRESHOLD`` to 32 MiB (the dynamic one's ceiling) and
  ``M_TRIM_THRESHOLD`` to 4 MiB, once a process, unless the operator set ``MALLOC_MMAP_THRESHOLD_`` or
  ``MALLOC_TRIM_THRESHOLD_``. A fixed value turns off glibc's *dynamic* thresholds: by default,
  each freed mmap'd block raises the mmap threshold to its size (up to 32 MiB) and the trim
  threshold to twice that, so after the first large activation the model's forward passes are
  served from its thread's arena, whose freed top is then kept below a trim threshold of up to
  64 MiB (``malloc_trim`` trims only the main arena's top); fixed, a freed top over 4 MiB goes
  back. The trim threshold is set explicitly because blocks freed before the call (the model's
  load) may already have raised it. A first vector build of 6,115 tools (no disk
  cache) left ~92 MB resident beside the model; with the thresholds fixed, ~66 MB, for ~6% more
  CPU in the build (bench/discovery.py --semantic-child, 53.3 against 50.1-50.6 s; 8 MiB / 128 KiB
  gave ~63 MB for 13-16% more). A query's arrays are far below either threshold: its latency is
  unchanged.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from typing import Any

__all__ = ["give_back", "fixed_thresholds"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # malloc.h
_TRIM_THRESHOLD, _MMAP_THRESHOLD = 4 << 20, 32 << 20
_ONCE = threading.Lock()
_fixed = False


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def give_back() -> None:
    """Return the heap's free pages to the system (see the module's doc)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def fixed_thresholds() -> None:
    """Fix glibc's mmap and trim thresholds for this process (see the module's doc)."""
    global _fixed
    with _ONCE:
        if _fixed:
            return
        _fixed = True
        if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
            return
        libc = _libc()
        if libc is not None:
            libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
            libc.mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
