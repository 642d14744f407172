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
