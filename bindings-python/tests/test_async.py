"""The asyncio layer: await and async with, without blocking the loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from pathlib import Path

import pytest

import repute
import repute._freed


def test_async_with_and_await(clock: repute.ManualClock) -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        assert await pool.register("proxy", "a")
        async with pool.acquire("shop") as lease:
            assert isinstance(lease, repute.AsyncLease)
            assert (lease.value, lease.token, lease.valid) == ("a", 1, True)
            await lease.renew()
            await lease.report_success(latency=0.1)
            assert (await pool.stats()).live_leases == 1
        assert lease.released
        held = await pool.acquire("shop")
        assert held.token == 2
        assert await pool.try_acquire("shop") is None
        await held.release()
        assert (await pool.stats()).live_leases == 0
        assert [type(e).__name__ for e in await pool.events()][:2] == ["RegisteredEvent", "LeasedEvent"]
        await pool.close()
        assert pool.pool.closed

    asyncio.run(main())


def test_waiting_does_not_block_the_event_loop() -> None:
    async def main() -> None:
        pool = repute.AsyncPool(repute.Pool())
        await pool.register("proxy", "a")
        held = await pool.acquire("shop")
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        async def release_later() -> None:
            await asyncio.sleep(0.1)
            await held.release()

        tick = asyncio.create_task(ticker())
        releaser = asyncio.create_task(release_later())
        lease = await pool.acquire("shop", timeout=5.0)
        tick.cancel()
        await releaser
        assert lease.token == 2
        assert ticks >= 10  # the loop kept running while we waited
        await lease.release()

    asyncio.run(main())


@pytest.mark.usefixtures("sleeps_until_woken")
def test_an_asyncio_release_wakes_the_pools_sleeping_acquires() -> None:
    async def main() -> None:
        native = repute.Pool()
        pool, other = repute.AsyncPool(native), repute.AsyncPool(native)
        await pool.register("proxy", "a")
        held = await pool.acquire("shop")
        waiters = [asyncio.create_task(other.acquire("shop", timeout=30.0).__aenter__()) for _ in range(2)]
        while len(repute._freed.freed(native)._line) < 2:
            await asyncio.sleep(0)
        await held.release()  # one AsyncPool's release wakes the other's waiters
        done, asleep = await asyncio.wait(waiters, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and len(asleep) == 1, "one got the permit, the other sleeps again"
        async with done.pop().result():
            pass  # leaving the block releases: the second is woken
        second = await asyncio.wait_for(asleep.pop(), 5.0)
        assert second.token == 3
        await second.release()

    asyncio.run(main())


@pytest.mark.usefixtures("sleeps_until_woken")
def test_a_blocking_release_on_another_thread_wakes_one_asyncio_waiter() -> None:
    async def main() -> None:
        native = repute.Pool()
        pool = repute.AsyncPool(native)
        native.register("proxy", "a")
        held = native.acquire("shop")  # the blocking API's lease
        waiters = [asyncio.create_task(pool.acquire("shop", timeout=30.0).__aenter__()) for _ in range(2)]
        await asleep(native, 2)
        assert await asyncio.to_thread(held.release) is True
        done, still = await asyncio.wait(waiters, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and len(still) == 1, "the one permit freed woke one waiter"
        first = done.pop().result()
        assert first.token == 2
        await asyncio.to_thread(first.lease.release)
        second = await asyncio.wait_for(still.pop(), 5.0)
        assert second.token == 3
        await second.release()

    asyncio.run(main())


def counting_attempts(pool: repute.AsyncPool) -> list[str]:
    """The contexts of ``pool``'s single tries, in order."""
    tried: list[str] = []
    attempt = pool._attempt

    async def counted(context: str, *rest: object) -> repute.Lease:
        tried.append(context)
        return await attempt(context, *rest)  # type: ignore[arg-type]

    pool._attempt = counted  # type: ignore[method-assign]
    return tried


async def asleep(native: repute.Pool, n: int) -> None:
    while len(repute._freed.freed(native)._line) < n:
        await asyncio.sleep(0)


@pytest.mark.usefixtures("sleeps_until_woken")
def test_a_release_wakes_the_first_in_line_alone() -> None:
    async def main() -> None:
        native = repute.Pool()
        pool = repute.AsyncPool(native)
        await pool.register("proxy", "a")
        held = await pool.acquire("shop")
        tried = counting_attempts(pool)
        waiters = []
        for i in range(5):
            waiters.append(asyncio.create_task(pool.acquire(f"site{i}", timeout=30.0).__aenter__()))
            await asleep(native, i + 1)
        assert len(tried) == 5
        await held.release()
        first = await asyncio.wait_for(waiters[0], 5.0)
        assert first.context == "site0", "the longest in line"
        assert len(tried) == 6, "one release, one attempt: the others sleep on"
        assert not any(w.done() for w in waiters[1:])
        await first.release()
        second = await asyncio.wait_for(waiters[1], 5.0)
        assert (second.context, len(tried)) == ("site1", 7)
        for waiter in waiters[2:]:
            waiter.cancel()
        await second.release()

    asyncio.run(main())


@pytest.mark.usefixtures("sleeps_until_woken")
def test_a_wake_the_first_in_line_cannot_use_is_handed_on() -> None:
    async def main() -> None:
        native = repute.Pool()
        pool = repute.AsyncPool(native)
        await pool.register("proxy", "a")
        await pool.register("key", "k")
        proxy, key = await pool.acquire("shop", kind="proxy"), await pool.acquire("shop", kind="key")
        tried = counting_attempts(pool)
        wants_key = asyncio.create_task(pool.acquire("first", kind="key", timeout=30.0).__aenter__())
        await asleep(native, 1)
        wants_proxy = asyncio.create_task(pool.acquire("second", kind="proxy", timeout=30.0).__aenter__())
        await asleep(native, 2)
        await proxy.release()
        granted = await asyncio.wait_for(wants_proxy, 5.0)
        assert granted.value == "a"
        assert tried == ["first", "second", "first", "second"], "woken first, the key's waiter handed it on"
        assert not wants_key.done()
        await key.release()
        assert (await asyncio.wait_for(wants_key, 5.0)).value == "k"

    asyncio.run(main())


@pytest.mark.usefixtures("sleeps_until_woken")
def test_a_waiter_cancelled_after_its_wake_hands_it_on() -> None:
    async def main() -> None:
        native = repute.Pool()
        pool = repute.AsyncPool(native)
        await pool.register("proxy", "a")
        held = await pool.acquire("shop")
        first = asyncio.create_task(pool.acquire("shop", timeout=30.0).__aenter__())
        await asleep(native, 1)
        second = asyncio.create_task(pool.acquire("shop", timeout=30.0).__aenter__())
        await asleep(native, 2)
        await held.release()  # wakes the first, which is cancelled before it can try
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        lease = await asyncio.wait_for(second, 5.0)
        assert lease.token == 2
        await lease.release()

    asyncio.run(main())


def test_timeout_and_cancellation_leave_nothing_held() -> None:
    async def main() -> None:
        pool = repute.AsyncPool(repute.Pool())
        await pool.register("proxy", "a")
        held = await pool.acquire("shop")
        with pytest.raises(repute.NoResourceAvailableError) as caught:
            await pool.acquire("shop", timeout=0.05)
        assert caught.value.retry_after is not None and 29.0 < caught.value.retry_after <= 30.0

        waiter = asyncio.create_task(pool.acquire("shop").__aenter__())
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        await held.release()
        await asyncio.sleep(0.05)  # let any orphaned grant be released
        assert (await pool.stats()).live_leases == 0

    asyncio.run(main())


def test_async_errors_are_the_same_exceptions() -> None:
    async def main() -> None:
        pool = await repute.AsyncPool.open()
        with pytest.raises(repute.InvalidInputError) as caught:
            await pool.register("", "x")
        assert caught.value.field == "resource.kind"
        with pytest.raises(repute.InvalidInputError) as caught:
            await pool.acquire("shop", timeout=-1.0)
        assert caught.value.field == "timeout"
        with pytest.raises(ZeroDivisionError):
            await pool.register("proxy", "a")
            async with pool.acquire("shop"):
                1 / 0
        assert (await pool.stats()).live_leases == 0

    asyncio.run(main())


class _CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor, counting what is handed to it."""

    submitted = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        _CountingExecutor.submitted += 1
        return super().submit(fn, *args, **kwargs)


class _Counting(concurrent.futures.ThreadPoolExecutor):
    """An executor that counts what it is handed, per instance."""

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers)
        self.count = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[no-untyped-def, override]
        self.count += 1
        return super().submit(fn, *args, **kwargs)


def test_calls_that_wait_on_no_network_run_inline(tmp_path: Path) -> None:
    async def main(store: str) -> tuple[int, int | None]:
        asyncio.get_running_loop().set_default_executor(_CountingExecutor(max_workers=1))
        pool = repute.AsyncPool(repute.Pool(store=store, tenant=f"inline-{os.getpid()}"))
        io = None
        if pool._io is not None:
            # Count what the pool's own IO thread is handed.
            io = pool._io = _Counting(max_workers=1)
        _CountingExecutor.submitted = 0
        await pool.register("proxy", "a")
        async with pool.acquire("shop") as lease:
            await lease.report_success(latency=0.1)
            await lease.renew()
        assert (await pool.stats()).live_leases == 0
        submitted = _CountingExecutor.submitted
        await pool.close()
        return submitted, None if io is None else io.count

    assert asyncio.run(main("memory")) == (0, None)
    assert asyncio.run(main(f"sqlite:{tmp_path / 'inline.db'}")) == (0, None)
    # Network calls run on the pool's own IO thread, never the loop's executor.
    default, own = asyncio.run(main(os.environ["REPUTE_TEST_PG_URL"]))
    assert default == 0 and own is not None and own >= 6


def test_every_pool_operation_has_an_asyncio_form() -> None:
    # The plain ones are written from the stubs with them; the hand-kept
    # list they replaced had missed `dropped_events`.
    operations = {n for n, v in vars(repute.Pool).items() if callable(v) and not n.startswith("_")}
    missing = {n for n in operations if not asyncio.iscoroutinefunction(getattr(repute.AsyncPool, n, None))}
    assert missing == {"acquire"}, "acquire is awaitable and an async context manager, not a coroutine"

    async def main() -> None:
        pool = repute.AsyncPool(repute.Pool())
        assert await pool.register("proxy", "a")
        await pool.block("proxy", "a", 5.0, "shop", "captcha")
        assert [c.context for c in await pool.cells("proxy", "a")] == [None, "shop"]
        assert await pool.dropped_events() == 0
        await pool.close()

    asyncio.run(main())


def test_a_wait_the_pool_knows_cannot_end_in_time_is_refused_at_once(clock: repute.ManualClock) -> None:
    # The pool clock never moves here: a waiting acquire that did not give
    # up at once would wait for ever.
    async def main() -> None:
        pool = await repute.AsyncPool.open(clock=clock, strategy="first")
        await pool.register("proxy", "a")
        async with pool.acquire("shop") as lease:
            await lease.report_http(403)
        # A site's ban: 300 s, tried early after 10 s; nothing else can free
        # it. A trial mostly finds the ban still on: a deadline before the
        # ban's end gives up at once, even one the trial comes within.
        for timeout in (5.0, 60.0):
            for acquire in (
                lambda: pool.acquire("shop", timeout=timeout),
                lambda: asyncio.to_thread(pool.pool.acquire, "shop", timeout),
            ):
                with pytest.raises(repute.NoResourceAvailableError) as caught:
                    await acquire()
                refusal = caught.value
                assert (refusal.cooling, refusal.retry_after, refusal.expected_after, refusal.settled) == (1, 10.0, 300.0, True)
        # A deadline past the ban's end waits, and takes the early trial.
        waiting = asyncio.ensure_future(pool.acquire("shop", timeout=400.0))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        clock.advance(10.0)
        trial = await asyncio.wait_for(waiting, 5.0)
        assert trial.lease_kind == "trial"
        await trial.release()
        await pool.close()

    asyncio.run(main())
