"""The vector store's dense step: the best view per tool, and rows held as the store's own."""

from __future__ import annotations

import numpy as np

from gateway.discovery.vectors import VectorStore


def _unit(rng: np.random.Generator, *shape: int) -> np.ndarray:
    rows = rng.standard_normal(shape).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows


def test_a_tools_cosine_is_the_best_of_its_views_to_the_bit() -> None:
    """The view-by-view maximum gives the floats ``.max(axis=1)`` of the per-view cosines gives:
    the same ranking and the same scores (the fusion reads the scores)."""
    rng = np.random.default_rng(7)
    for views in (2, 3):
        rows = _unit(rng, 500, views, 48)
        prints = {f"t{i:03}": f"fp{i}" for i in range(500)}
        store = VectorStore()
        store.put(list(prints.values()), rows)
        for _ in range(5):
            query = _unit(rng, 48)
            expected = np.einsum("ivj,j->iv", rows, query).max(axis=1)
            order = sorted(range(500), key=lambda i: (-float(expected[i]), i))[:50]
            hits = store.nearest(query, prints, 50)
            assert [h.name for h in hits] == [f"t{i:03}" for i in order]
            assert [h.score for h in hits] == [float(expected[i]) for i in order]


def test_the_store_keeps_its_own_copy_of_the_rows_put() -> None:
    """The rows given are copied (they may live in the local model's thread's memory): changing
    or dropping the caller's matrix changes nothing the store answers."""
    rows = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    store = VectorStore()
    store.put(["fa", "fb"], rows)
    prints = {"a": "fa", "b": "fb"}
    rows[:] = rows[::-1].copy()  # the caller reuses its buffer
    hits = store.nearest(np.array([1.0, 0.0], dtype=np.float32), prints, 2)
    assert [(h.name, h.score) for h in hits] == [("a", 1.0), ("b", 0.0)]


def test_rows_put_again_before_a_compile_keep_the_last_value_and_no_other_row_moves() -> None:
    """Many puts between compiles (a sync's batches: the buffer grows under them), a fingerprint
    put twice on the way: each tool ranks by the last vector put for it."""
    rng = np.random.default_rng(3)
    store = VectorStore()
    expected: dict[str, np.ndarray] = {}
    for batch in range(60):  # 240 rows: past the first buffers' sizes
        prints = [f"fp{batch * 4 + k}" for k in range(4)]
        if batch % 7 == 3:
            prints[0] = "fp0"  # put again: replaces the first vector of fp0
        rows = _unit(rng, 4, 2, 16)
        store.put(prints, rows)
        expected.update(zip(prints, rows, strict=True))
    catalog = {f"t_{fp}": fp for fp in expected}
    query = _unit(rng, 16)
    hits = store.nearest(query, catalog, len(catalog))
    best = {f"t_{fp}": float(max(rows[0] @ query, rows[1] @ query)) for fp, rows in expected.items()}
    assert len(hits) == len(catalog) and all(abs(h.score - best[h.name]) < 1e-6 for h in hits)
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))
