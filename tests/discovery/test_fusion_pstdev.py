"""The fusion's z-scores use the same standard deviation as ``statistics.pstdev``, to the bit
(:func:`gateway.discovery.fusion._pstdev`: exact integers instead of Fractions)."""

from __future__ import annotations

import random
import statistics
import struct

from gateway.discovery.fusion import _pstdev


def _float32(x: float) -> float:
    return float(struct.unpack("f", struct.pack("f", x))[0])


def test_pstdev_is_statistics_pstdev_to_the_bit() -> None:
    rng = random.Random(28)
    for case in range(4000):
        n = rng.choice([1, 2, 3, 7, 50, 50, 64])
        if case % 4 == 0:  # cosines as the vectors give them (float32)
            values = [_float32(rng.uniform(-0.2, 0.9)) for _ in range(n)]
        elif case % 4 == 1:  # close together
            values = [_float32(0.3 + rng.gauss(0, 1e-4)) for _ in range(n)]
        elif case % 4 == 2:  # all alike
            values = [_float32(rng.random())] * n
        else:  # any finite floats, wide ranges
            values = [rng.gauss(0, 10 ** rng.randint(-9, 4)) for _ in range(n)]
        assert _pstdev(values) == statistics.pstdev(values), values
