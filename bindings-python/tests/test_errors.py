"""Every exception type, each from a real trigger, with its attributes."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import repute
from repute import _native


def test_every_code_maps_to_its_class_with_its_fields() -> None:
    rows, examples = _native._error_table()
    assert [e.code for e in examples] == [code for code, *_ in rows]
    for (code, _status, class_name, fields), e in zip(rows, examples, strict=True):
        assert type(e) is getattr(repute, class_name), code
        assert class_name.endswith("Error")
        for field in fields:
            assert hasattr(e, field), (code, field)
        assert " ns" not in str(e)
    by_code = {e.code: e for e in examples}
    refusal = by_code["no_resource_available"]
    assert isinstance(refusal, repute.NoResourceAvailableError)
    assert (refusal.retry_after, refusal.expected_after, refusal.none_registered) == (1.5, 290.0, False)
    assert (refusal.blocked, refusal.rate_limited, refusal.cooling, refusal.leased, refusal.limited) == (1, 1, 1, 0, 0)
    assert str(refusal) == (
        "no resource available (1 blocked, 1 rate limited, 1 cooling; retry after 1.5 s, expected after 290 s)"
    )
    rate = by_code["rate_limited"]
    assert isinstance(rate, repute.RateLimitedError)
    assert rate.retry_after == 0.25 and str(rate) == "rate limited (retry after 0.25 s)"
    assert rate.settled is True, "only time ends a rate limit's wait"
    conflict = by_code["storage_conflict"]
    assert isinstance(conflict, repute.StoreError)
    assert (conflict.expected, conflict.found, conflict.mine, conflict.stored) == (1, 2, None, None)
    epoch = by_code["stale_epoch"]
    assert isinstance(epoch, repute.StoreError)
    assert (epoch.expected, epoch.found, epoch.mine, epoch.stored) == (None, None, 3, 4)
    snapshot = by_code["invalid_snapshot"]
    assert isinstance(snapshot, repute.InvalidSnapshotError)
    assert (snapshot.reason, snapshot.field, snapshot.rule) == ("invalid", "policy", "bad")
    assert isinstance(by_code["trap"], repute.InternalError)
    assert isinstance(by_code["runtime"], repute.InternalError)
    assert isinstance(by_code["closed"], repute.PoolClosedError)
    assert isinstance(by_code["not_owner"], repute.NotOwnerError) and by_code["not_owner"].owner == "pid 7"
    assert isinstance(by_code["leased"], repute.LeasedError) and by_code["leased"].live == 2


def test_exported_classes_are_the_tables() -> None:
    rows, _ = _native._error_table()
    exported = {
        name
        for name in repute.__all__
        if isinstance(getattr(repute, name), type) and issubclass(getattr(repute, name), repute.ReputeError)
    }
    assert exported == {class_name for _, _, class_name, _ in rows} | {"ReputeError"}


def test_exceptions_share_one_base() -> None:
    for name in [
        "InvalidInputError",
        "UnknownResourceError",
        "UnknownLeaseError",
        "StaleLeaseError",
        "LeaseExpiredError",
        "BlockedError",
        "NoResourceAvailableError",
        "LeasedError",
        "BudgetExhaustedError",
        "RateLimitedError",
        "InvalidSnapshotError",
        "StoreError",
        "NotOwnerError",
        "PoolClosedError",
        "InternalError",
    ]:
        cls = getattr(repute, name)
        assert issubclass(cls, repute.ReputeError)
        assert cls.__module__ == "repute"
    assert issubclass(repute.ReputeError, Exception)


def test_invalid_input_names_field_and_rule(pool: repute.Pool) -> None:
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.register("", "x")
    assert caught.value.code == "invalid_input"
    assert caught.value.field == "resource.kind"
    assert caught.value.rule
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.acquire("*")
    assert caught.value.field == "context"
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.register("proxy", "a", permits=0)
    assert caught.value.field == "permits"
    pool.register("proxy", "a")
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.report_failure("proxy", "a", "c", "meteor", latency=1.0)
    assert caught.value.field == "failure.kind"
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.report_success("proxy", "a", "c", latency=-1.0)
    assert caught.value.field == "latency"
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.acquire("c", timeout=float("nan"))
    assert caught.value.field == "timeout"
    assert pool.cells("proxy", "a")[0].observations == 0  # nothing half-applied


def test_invalid_pool_arguments() -> None:
    for store in ["mysql://db", "sqlite:", "Memory", ""]:
        with pytest.raises(repute.InvalidInputError) as caught:
            repute.Pool(store=store)
        assert (caught.value.field, caught.value.code) == ("store", "invalid_input")
        assert "postgres://" in caught.value.rule
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(mode="solo")  # type: ignore[arg-type]
    assert caught.value.field == "mode"
    for owner_ttl in [0.0, -1.0, float("nan"), float("inf")]:
        with pytest.raises(repute.InvalidInputError) as caught:
            repute.Pool(owner_ttl=owner_ttl)
        assert caught.value.field == "owner_ttl"
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(strategy="psychic")  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.rule) == ("strategy", "must be one of classic, thompson, first")
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(lease_ttl=0.0)
    assert (caught.value.field, caught.value.rule) == ("lease_ttl", "must be > 0")
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(lease_ttl=10.0, renew_margin=10.0)
    assert caught.value.field == "renew_margin"
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.ManualClock().advance(-1.0)
    assert caught.value.field == "seconds"


def test_unknown_resource(pool: repute.Pool) -> None:
    with pytest.raises(repute.UnknownResourceError) as caught:
        pool.cells("proxy", "nope")
    assert caught.value.code == "unknown_resource"


def test_unknown_lease(pool: repute.Pool) -> None:
    with pytest.raises(repute.UnknownLeaseError) as caught:
        pool.resume(999, 1)
    assert caught.value.code == "unknown_lease"


def test_stale_lease_never_tells_the_current_token(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    with pytest.raises(repute.StaleLeaseError) as caught:
        pool.resume(lease.id, lease.token + 1)
    assert caught.value.code == "stale_lease"
    assert not hasattr(caught.value, "current")
    assert str(lease.token) not in str(caught.value)
    assert lease.valid  # the real holder is unaffected


def test_lease_expired(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("proxy", "a")
    with pytest.raises(repute.LeaseExpiredError) as caught:
        with pool.acquire("c"):
            clock.advance(31)  # the body outlived the lease
    assert caught.value.code == "lease_expired"
    lease = pool.acquire("c")
    clock.advance(31)
    with pytest.raises(repute.LeaseExpiredError):
        pool.resume(lease.id, lease.token)


def test_blocked(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    pool.block("proxy", "a", reason="abuse")
    with pytest.raises(repute.BlockedError) as caught:
        lease.renew()
    assert caught.value.code == "blocked"


def test_no_resource_available(pool: repute.Pool) -> None:
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("c", timeout=0)
    assert caught.value.code == "no_resource_available"
    assert caught.value.retry_after is None  # no timer will change anything


def test_resource_leased(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    pool.acquire("c")
    with pytest.raises(repute.LeasedError) as caught:
        pool.unregister("proxy", "a")
    assert caught.value.code == "leased"
    assert caught.value.live == 1


def test_budget_exhausted(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, max_resources=1)
    pool.register("proxy", "a")
    with pytest.raises(repute.BudgetExhaustedError) as caught:
        pool.register("proxy", "b")
    assert caught.value.code == "budget_exhausted"
    assert caught.value.budget == "max_resources"
    assert caught.value.limit == 1
    assert len(pool.resources()) == 1


def test_rate_limited(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, rate=2.0, burst=1)
    pool.register("proxy", "a", permits=5)
    pool.acquire("c")
    with pytest.raises(repute.RateLimitedError) as caught:
        pool.try_acquire("c")
    assert caught.value.code == "rate_limited"
    assert (caught.value.retry_after, caught.value.settled) == (0.5, True)
    assert str(caught.value) == "rate limited (retry after 0.5 s)"
    # The timeout runs on the pool's clock: it ends when the clock gets there.
    timer = threading.Timer(0.05, clock.advance, (0.05,))
    timer.start()
    with pytest.raises(repute.RateLimitedError):
        pool.acquire("c", timeout=0.05)
    timer.join()
    clock.advance(0.45)
    assert pool.try_acquire("c") is not None


def test_invalid_snapshot_leaves_the_pool_as_it_was(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    good = pool.snapshot()
    for bad, reason in [
        (b"", "truncated"),
        (b"not a snapshot", "foreign"),
        (good[:-3], "truncated"),
        (good[:20] + bytes([good[20] ^ 1]) + good[21:], "checksum"),
    ]:
        with pytest.raises(repute.InvalidSnapshotError) as caught:
            pool.restore(bad)
        assert caught.value.code == "invalid_snapshot"
        assert (caught.value.reason, caught.value.field, caught.value.rule) == (reason, None, None), bad
    with pytest.raises(repute.InvalidSnapshotError):
        pool.restore_json("{}")
    assert [r.value for r in pool.resources()] == ["a"]


def test_store_error(tmp_path: Path) -> None:
    with pytest.raises(repute.StoreError) as caught:
        repute.Pool(store=f"sqlite:{tmp_path / 'missing-dir' / 'repute.db'}")
    assert caught.value.code == "storage_unavailable"
    assert (caught.value.expected, caught.value.found, caught.value.mine, caught.value.stored) == (None,) * 4


def test_not_owner(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'repute.db'}"
    first = repute.Pool(store=store, tenant="shop")
    with pytest.raises(repute.NotOwnerError) as caught:
        repute.Pool(store=store, tenant="shop")
    assert caught.value.code == "not_owner"
    assert f"process {os.getpid()}" in caught.value.owner
    repute.Pool(store=store, tenant="other").close()  # tenants are owned separately
    first.close()
    repute.Pool(store=store, tenant="shop").close()  # closing released ownership


def test_pool_closed(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    pool.close()
    assert pool.closed
    pool.close()  # closing twice is a no-op
    with pytest.raises(repute.PoolClosedError) as caught:
        pool.stats()
    assert caught.value.code == "closed"
    with pytest.raises(repute.PoolClosedError):
        lease.release()
