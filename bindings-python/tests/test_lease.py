"""The lease cycle: acquire, attributes, renew, report, release, scoping."""

from __future__ import annotations

import threading
import time

import pytest

import repute


def test_full_lease_cycle(pool: repute.Pool, clock: repute.ManualClock) -> None:
    assert pool.register("proxy", "a") is True
    assert pool.register("proxy", "a") is False  # unchanged

    lease = pool.acquire("example.com")
    assert (lease.kind, lease.value, lease.context) == ("proxy", "a", "example.com")
    assert lease.permit == 0
    assert lease.token == 1
    assert lease.lease_kind == "client"
    assert lease.ttl == 30.0
    assert lease.granted_at == 0.0
    assert lease.expires_at == 30.0
    assert lease.deadline == 27.0  # TTL minus the default margin of a tenth
    assert lease.expires_in == 27.0
    assert lease.valid and not lease.released
    assert pool.stats().live_leases == 1

    clock.advance(10)
    assert lease.expires_in == 17.0
    lease.renew()
    assert lease.expires_at == 40.0
    assert lease.deadline == 37.0
    assert lease.valid

    lease.report_success(latency=0.25)
    lease.release()
    assert not lease.valid and lease.released
    assert lease.expires_in == 0.0
    lease.release()  # a second release is a no-op
    assert pool.stats().live_leases == 0

    cells = pool.cells("proxy", "a")
    assert [c.context for c in cells] == [None, "example.com"]
    assert cells[1].observations == 1
    assert cells[1].score == 5
    assert cells[1].latency == pytest.approx(0.25)

    again = pool.acquire("example.com")
    assert again.token == 2  # the permit's fence only goes up
    again.release()


def test_with_releases_on_exit(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    with pool.acquire("example.com") as lease:
        assert pool.stats().live_leases == 1
        assert lease.valid
    assert lease.released
    assert pool.stats().live_leases == 0


def test_with_releases_when_the_body_raises(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    with pytest.raises(KeyError):
        with pool.acquire("example.com") as lease:
            raise KeyError("boom")
    assert lease.released
    assert pool.stats().live_leases == 0


def test_try_acquire_returns_none_when_nothing_is_free(pool: repute.Pool) -> None:
    assert pool.try_acquire("example.com") is None
    pool.register("proxy", "a")
    first = pool.try_acquire("example.com")
    assert first is not None and first.token == 1
    assert pool.try_acquire("example.com") is None
    first.release()
    second = pool.try_acquire("example.com")
    assert second is not None and second.token == 2


def test_permits_are_leased_independently(pool: repute.Pool) -> None:
    pool.register("key", "k", permits=3)
    leases = [pool.acquire("api") for _ in range(3)]
    assert sorted(lease.permit for lease in leases) == [0, 1, 2]
    assert all(lease.token == 1 for lease in leases)  # one fence sequence per permit
    assert pool.try_acquire("api") is None
    assert pool.resources()[0].leased == 3


def test_acquire_waits_for_a_release_in_another_thread(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    held = pool.acquire("example.com")
    timer = threading.Timer(0.05, held.release)
    timer.start()
    started = time.monotonic()
    lease = pool.acquire("example.com", timeout=10.0)
    waited = time.monotonic() - started
    timer.join()
    assert lease.token == 2
    assert 0.04 <= waited < 5.0


def test_acquire_times_out_with_the_retry_hint(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("proxy", "a")
    pool.acquire("example.com")
    started = time.monotonic()
    # The timeout runs on the pool's clock: nothing ends it until the clock moves.
    timer = threading.Timer(0.1, clock.advance, (0.1,))
    timer.start()
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("example.com", timeout=0.1)
    timer.join()
    assert time.monotonic() - started >= 0.1
    # The held lease expires 30 s after it was granted, on the pool clock.
    assert caught.value.retry_after == pytest.approx(29.9)
    assert (caught.value.leased, caught.value.cooling, caught.value.none_registered) == (1, 0, False)


def test_waiting_releases_the_gil(pool: repute.Pool, clock: repute.ManualClock) -> None:
    waiter = threading.Thread(target=lambda: pytest.raises(repute.NoResourceAvailableError, pool.acquire, "c", 0.3))
    timer = threading.Timer(0.3, clock.advance, (0.3,))
    waiter.start()
    timer.start()
    spins = 0
    until = time.monotonic() + 0.2
    while time.monotonic() < until:
        spins += 1
    waiter.join()
    timer.join()
    assert spins > 10_000


def test_local_deadline_demotes_the_lease(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("example.com")
    clock.advance(26.9)
    assert lease.valid
    clock.advance(0.1)  # 27 s: the local deadline, 3 s before the authority's expiry
    assert not lease.valid
    assert lease.expires_in == 0.0
    with pytest.raises(repute.LeaseExpiredError, match="lease expired"):
        lease.renew()
    assert not lease.valid
    assert (lease.lost, lease.loss) == (True, "expired")
    # The authority still holds it: releasing frees the permit early, and
    # says the lease had been lost instead of raising.
    assert pool.stats().live_leases == 1
    assert lease.release() is False
    assert pool.stats().live_leases == 0


def test_a_failed_renewal_loses_the_lease_for_good(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("example.com")
    pool.block("proxy", "a")
    with pytest.raises(repute.BlockedError):
        lease.renew()
    assert not lease.valid and not lease.released
    pool.unblock("proxy", "a")
    with pytest.raises(repute.LeaseExpiredError):
        lease.renew()  # lost stays lost, even though the authority would agree now
    with lease:
        pass  # releasing a lost lease raises nothing
    assert lease.released


def test_renew_margin_sets_the_local_deadline(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, lease_ttl=10.0, renew_margin=2.5)
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    assert (lease.expires_at, lease.deadline) == (10.0, 7.5)


def test_reports_move_reputation_and_cool_a_cell(clock: repute.ManualClock) -> None:
    # Probes are the recovery of the classic (reputation-pool 0.5.0) rules.
    pool = repute.Pool(clock=clock, strategy="first", seed=7, recovery="classic")
    pool.register("proxy", "a")
    with pool.acquire("shop") as lease:
        lease.report_failure(repute.FailureKind.TIMEOUT, latency=1.0)
    pool.report_failure("proxy", "a", "shop", "timeout", latency=1.0)
    pool.report_failure("proxy", "a", "shop", repute.FailureKind.TIMEOUT, latency=1.0)
    cell = pool.cells("proxy", "a")[1]
    assert cell.state == "cooling"
    assert cell.score == -15
    assert cell.consecutive_failures == 3
    assert cell.cause is repute.FailureKind.TIMEOUT
    assert cell.cooling_until == 240.0  # 60 s for a timeout, doubled per failure after the first
    assert pool.try_acquire("shop") is None
    assert pool.due_for_probe() == []  # listed only once the cooldown ends
    clock.advance(240)
    [due] = pool.due_for_probe()
    assert isinstance(due, repute.ProbeTarget)
    assert (due.kind, due.value, due.context) == ("proxy", "a", "shop")
    assert repr(due) == "ProbeTarget(kind='proxy', value='a', context='shop')"
    probe = pool.acquire_for_probe("proxy", "a", "shop")
    assert probe.lease_kind == "probe"
    assert probe.ttl == 15.0
    probe.report_success(latency=0.1)
    probe.release()
    pool.report_success("proxy", "a", "shop", latency=0.1)
    assert pool.cells("proxy", "a")[1].state == "healthy"


def test_block_and_unblock(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("proxy", "a")
    pool.block("proxy", "a", seconds=5.0, context="shop", reason="captcha")
    assert pool.try_acquire("shop") is None
    other = pool.acquire("news")
    other.release()
    cell = pool.cells("proxy", "a")[1]
    assert (cell.blocked, cell.blocked_until, cell.block_reason) == (True, 5.0, "captcha")
    clock.advance(5)
    shop = pool.acquire("shop")
    shop.release()
    pool.block("proxy", "a")
    assert pool.resources()[0].blocked
    assert pool.unblock("proxy", "a") is True
    assert pool.unblock("proxy", "a") is False


def test_resume_hands_a_lease_over(pool: repute.Pool, clock: repute.ManualClock) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    clock.advance(5)
    other = pool.resume(lease.id, lease.token)
    assert (other.id, other.token) == (lease.id, lease.token)
    assert other.expires_at == 35.0  # resuming renews
    other.release()
    assert pool.stats().live_leases == 0


def test_unregister_force_revokes(pool: repute.Pool) -> None:
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    pool.unregister("proxy", "a", force=True)
    assert pool.resources() == []
    with pytest.raises(repute.UnknownLeaseError):
        lease.renew()  # revoked: the pool no longer knows the lease
    assert not lease.valid
    pool.register("proxy", "a")
    assert pool.acquire("c").token == 2  # fence counters outlive the registration
