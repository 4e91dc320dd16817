from __future__ import annotations

import pytest

import repute


@pytest.fixture
def clock() -> repute.ManualClock:
    return repute.ManualClock()


@pytest.fixture
def pool(clock: repute.ManualClock) -> repute.Pool:
    """A memory pool on a manual clock with deterministic selection."""
    return repute.Pool(clock=clock, strategy="first", seed=7)
