from __future__ import annotations

import pytest

import repute
import repute._freed


@pytest.fixture
def clock() -> repute.ManualClock:
    return repute.ManualClock()


@pytest.fixture
def pool(clock: repute.ManualClock) -> repute.Pool:
    """A memory pool on a manual clock with deterministic selection."""
    return repute.Pool(clock=clock, strategy="first", seed=7)


@pytest.fixture
def sleeps_until_woken(monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio waits for a permit that only a wake ends, never their backoff:
    a waiter that gets a permit got it because a release woke it."""
    monkeypatch.setattr(repute._freed.Freed, "_timer", lambda *_: None)
