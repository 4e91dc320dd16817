"""The holder's side: auto-renewal, the loss signal and max_hold. The same
cases run in the Node suite (test/holder.test.mjs)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable

import pytest

import repute


def wait_for(condition: Callable[[], bool], within: float = 5.0) -> bool:
    """Polls `condition` until it holds or `within` seconds passed."""
    until = time.monotonic() + within
    while time.monotonic() < until:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def short_pool(lease_ttl: float = 1.5) -> repute.Pool:
    """A pool whose leases lapse soon. Loss tests keep a TTL far above a
    scheduling hiccup, so a starved watcher cannot turn the loss they cause
    into an expiry."""
    pool = repute.Pool(lease_ttl=lease_ttl, strategy="first", seed=1)
    pool.register("proxy", "a")
    return pool


def test_auto_renew_holds_a_short_lease_far_past_its_ttl() -> None:
    pool = short_pool(lease_ttl=0.3)
    lease = pool.acquire("c", auto_renew=True)
    token = lease.token
    until = time.monotonic() + 2.0
    while time.monotonic() < until:
        # Nobody else is granted the permit while the holder keeps it.
        assert pool.try_acquire("c") is None
        time.sleep(0.02)
    assert lease.valid and not lease.lost
    assert lease.token == token
    kinds = [type(e).__name__ for e in pool.events()]
    assert "LeaseExpiredEvent" not in kinds
    # Renewed at a third of the TTL: about 20 renewals in 2 s.
    assert kinds.count("RenewedEvent") >= 6
    assert pool.stats().live_leases == 1
    assert lease.release() is True
    assert pool.try_acquire("c") is not None


def test_a_block_loses_an_auto_renewed_lease_once() -> None:
    pool = short_pool()
    lease = pool.acquire("c", auto_renew=True)
    lost: list[str] = []
    lease.on_lost(lost.append)
    pool.block("proxy", "a")
    assert wait_for(lambda: lost != [])
    time.sleep(0.6)  # another renewal round: the callback does not run again
    assert lost == ["blocked"]
    assert (lease.lost, lease.loss, lease.valid) == (True, "blocked", False)
    assert lease.release() is False


def test_a_refused_renewal_loses_the_lease_once() -> None:
    pool = short_pool()
    lease = pool.acquire("c", auto_renew=True)
    lost: list[str] = []
    lease.on_lost(lost.append)
    pool.unregister("proxy", "a", force=True)  # revokes the lease
    assert wait_for(lambda: lost != [])
    time.sleep(0.6)
    assert lost == ["renewal_refused"]
    assert lease.release() is False


def test_a_failed_explicit_renewal_fires_the_callback_once() -> None:
    pool = short_pool()
    lease = pool.acquire("c")
    lost: list[str] = []
    lease.on_lost(lost.append)
    pool.block("proxy", "a")
    with pytest.raises(repute.BlockedError):
        lease.renew()
    with pytest.raises(repute.LeaseExpiredError):
        lease.renew()
    assert lost == ["blocked"]
    # Listening after the loss runs the callback at once.
    late: list[str] = []
    lease.on_lost(late.append)
    assert late == ["blocked"]


def test_a_deadline_passing_unrenewed_fires_the_callback(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, lease_ttl=10.0)
    pool.register("proxy", "a")
    lease = pool.acquire("c")
    lost: list[str] = []
    lease.on_lost(lost.append)
    clock.advance(9.0)  # the local deadline: TTL minus a tenth
    assert wait_for(lambda: lost != [])
    assert lost == ["expired"]


def test_max_hold_ends_an_auto_renewed_lease_and_frees_its_permit() -> None:
    pool = short_pool()
    lease = pool.acquire("c", auto_renew=True, max_hold=0.6)
    lost: list[str] = []
    lease.on_lost(lost.append)
    assert wait_for(lambda: lost != [])
    assert lost == ["max_hold"]
    assert lease.released and not lease.valid
    # The permit came back at once, not a TTL later.
    successor = pool.try_acquire("c")
    assert successor is not None and successor.token == lease.token + 1
    assert lease.release() is False  # released already, after it was lost


def test_max_hold_goes_with_auto_renew() -> None:
    pool = short_pool()
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.acquire("c", max_hold=1.0)
    assert (caught.value.field, caught.value.rule) == ("max_hold", "goes with auto_renew")
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.acquire("c", auto_renew=True, max_hold=0.0)
    assert caught.value.field == "max_hold"
    assert pool.stats().live_leases == 0


def test_closing_the_pool_loses_watched_leases_once() -> None:
    pool = short_pool()
    lease = pool.acquire("c", auto_renew=True)
    lost: list[str] = []
    lease.on_lost(lost.append)
    pool.close()
    assert wait_for(lambda: lost != [])
    time.sleep(0.2)
    assert lost == ["closed"]


def test_a_released_lease_is_never_lost() -> None:
    pool = short_pool()
    lease = pool.acquire("c", auto_renew=True)
    lost: list[str] = []
    lease.on_lost(lost.append)
    assert lease.release() is True
    time.sleep(0.6)
    assert lost == [] and not lease.lost


def test_the_callback_runs_off_the_renewal_thread_safely() -> None:
    pool = short_pool()
    lease = pool.acquire("c", auto_renew=True)
    seen = threading.Event()

    def on_lost(loss: str) -> None:
        # Calling back into the pool from the callback must not deadlock.
        assert pool.stats().live_leases == 1
        seen.set()

    lease.on_lost(on_lost)
    pool.block("proxy", "a")
    assert seen.wait(5.0)


def test_asyncio_cancel_on_loss_ends_the_block() -> None:
    async def main() -> list[str]:
        apool = repute.AsyncPool(short_pool())
        steps: list[str] = []

        async def work() -> None:
            async with apool.acquire("c", auto_renew=True, cancel_on_loss=True) as lease:
                steps.append(lease.lease_kind)
                await apool.block("proxy", "a")
                await asyncio.sleep(10)
                steps.append("not reached")

        task = asyncio.create_task(work())
        with pytest.raises(asyncio.CancelledError):
            await task
        steps.append(str((await apool.stats()).live_leases))
        return steps

    assert asyncio.run(main()) == ["client", "0"]


def test_asyncio_acquire_waits_on_the_pools_clock(clock: repute.ManualClock) -> None:
    async def main() -> str:
        apool = repute.AsyncPool(repute.Pool(clock=clock))
        await apool.register("proxy", "a")
        await apool.acquire("c")
        async def second() -> repute.AsyncLease:
            return await apool.acquire("c", timeout=5.0)

        waiter = asyncio.create_task(second())
        await asyncio.sleep(0.2)
        # Real time passed, the pool's clock did not: still waiting.
        assert not waiter.done()
        clock.advance(5.0)
        with pytest.raises(repute.NoResourceAvailableError) as caught:
            await waiter
        return caught.value.code

    assert asyncio.run(main()) == "no_resource_available"


def test_acquire_waits_without_limit_by_default(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock, lease_ttl=1.0)
    pool.register("proxy", "a")
    # A block with an end (one without would refuse at once: nothing but an
    # unblock could serve the acquire).
    pool.block("proxy", "a", seconds=3600.0)
    got: list[repute.Lease] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire("c")))
    waiter.start()
    clock.advance(60.0)  # far past any lease TTL on the pool's clock
    time.sleep(0.2)
    assert waiter.is_alive() and got == []
    pool.unblock("proxy", "a")  # wakes the waiter
    waiter.join(5.0)
    assert [lease.value for lease in got] == ["a"]
