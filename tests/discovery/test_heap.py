"""heap.py: glibc's mmap threshold is fixed once a process, and an operator's own setting is left
alone. What it is for (the encoder's freed activations given back: a first 6,115-tool build ~97 →
~66 MB beside the model) is measured by ``bench/discovery.py --semantic --cold``; here, the
mechanism: with glibc's dynamic threshold, a 16 MiB block freed raises the threshold, so a 12 MiB
array is then carved from the heap (whose freed top may stay resident); with the threshold fixed at
8 MiB it is a mapping of its own, unmapped when freed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import sys
import numpy as np
from gateway.discovery import heap
if sys.argv[1] == "fixed":
    heap.fixed_thresholds()
    heap.fixed_thresholds()  # once a process: a second call changes nothing

def mapped_alone(nbytes):
    # Whether an anonymous mapping of about nbytes exists (glibc adds a page of its own).
    for line in open("/proc/self/maps"):
        fields = line.split()
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if len(fields) < 6 and nbytes <= end - start < nbytes + (1 << 16):
            return True
    return False

big = np.ones(16 << 18, dtype=np.float32)  # 16 MiB, mapped; freed: a dynamic threshold rises to it
del big
array = np.ones(12 << 18, dtype=np.float32)  # 12 MiB
print(int(mapped_alone(array.nbytes)))
"""


def _mapped_alone(mode: str, **env: str) -> bool:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**{k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")},
                              "PYTHONPATH": str(REPO), **env})
    return out.stdout.strip() == "1"


def test_the_fixed_threshold_keeps_large_arrays_out_of_the_heap() -> None:
    assert not _mapped_alone("dynamic")  # glibc's default: the 12 MiB array is carved from the heap
    assert _mapped_alone("fixed")


def test_an_operators_own_malloc_setting_is_left_alone() -> None:
    # The operator set a threshold of their own (64 MiB): fixed_thresholds does not override it.
    assert not _mapped_alone("fixed", MALLOC_MMAP_THRESHOLD_=str(64 << 20))
