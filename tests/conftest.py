"""Shared fixtures: service addresses from the environment, with the machine's defaults.

A missing service is a failure, not a skip: CI must notice it.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture
def pg_url() -> str:
    """A libpq-style URL of the test PostgreSQL database (TEST_PG_URL)."""
    return os.environ.get("TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def redis_url() -> str:
    """The test Redis (TEST_REDIS_URL)."""
    return os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
