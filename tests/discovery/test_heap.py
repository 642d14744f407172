"""heap.py: glibc's thresholds are fixed once a process, and an operator's own setting is left
alone. What it is for (the encoder's freed activations given back: a first 6,115-tool build keeps
~66 MB beside the model instead of ~92) is measured by ``bench/discovery.py --semantic --cold``;
here, the mechanism, in a child process (mallopt is process-wide): a 30 MiB block, mapped and
freed, raises glibc's dynamic thresholds (mmap to 30 MiB, trim to 60), so a 24 MiB array is then
carved from the heap and stays resident once freed; with the thresholds fixed (trim at 4 MiB) the
heap gives it back at once."""

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

def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

big = np.ones(30 << 18, dtype=np.float32)  # 30 MiB
del big
array = np.ones(24 << 18, dtype=np.float32)  # 24 MiB, touched
held = rss_kb()
del array
returned_mib = (held - rss_kb()) // 1024
print(returned_mib)
"""


def _returned_mib(mode: str, **env: str) -> int:
    out = subprocess.run([sys.executable, "-c", CHILD, mode], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**{k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")},
                              "PYTHONPATH": str(REPO), **env})
    return int(out.stdout)


def test_fixed_thresholds_give_freed_arrays_back() -> None:
    assert _returned_mib("dynamic") < 4  # glibc's default: the freed 24 MiB stay resident
    assert _returned_mib("fixed") >= 20


def test_an_operators_own_malloc_setting_is_left_alone() -> None:
    # An operator who set glibc's thresholds high (keep freed memory for reuse) keeps them: the
    # freed 24 MiB stay resident although fixed_thresholds was called.
    assert _returned_mib("fixed", MALLOC_MMAP_THRESHOLD_=str(64 << 20), MALLOC_TRIM_THRESHOLD_=str(256 << 20)) < 4
