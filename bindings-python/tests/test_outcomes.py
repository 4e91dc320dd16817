"""The default path: recovery without a probe loop, the provider's answers
(429 + Retry-After, quotas, dead keys), explained refusals, fail-open and
cooling rules, as a Python user meets them."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import repute


def keys(clock: repute.ManualClock, **options: object) -> repute.Pool:
    pool = repute.Pool(clock=clock, strategy="first", seed=7, **options)  # type: ignore[arg-type]
    pool.register("api-key", "k1")
    return pool


def test_a_timed_out_resource_comes_back_through_one_trial(clock: repute.ManualClock) -> None:
    pool = keys(clock)
    for _ in range(3):
        with pool.acquire("gpt") as lease:
            lease.report_failure("timeout", latency=1.0)
    # Nothing else to choose: one early trial of the transient cooldown.
    early = pool.acquire("gpt", timeout=0)
    assert early.lease_kind == "trial"
    assert pool.try_acquire("gpt") is None
    early.report_failure("timeout", latency=1.0)
    early.release()
    # It failed: the next exponent (480 s), and the next early trial a base
    # cooldown (60 s) after this one; nothing else can come sooner.
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("gpt", timeout=0)
    assert (caught.value.cooling, caught.value.retry_after, caught.value.settled) == (1, 60.0, True)
    clock.advance(480.0)
    assert pool.due_for_probe() == []
    trial = pool.acquire("gpt")
    assert trial.lease_kind == "trial"
    assert pool.try_acquire("gpt") is None
    trial.report_success(latency=0.2)
    trial.release()
    assert pool.cells("api-key", "k1")[1].state == "recovering"
    assert pool.acquire("gpt").lease_kind == "client"


def test_a_waiting_acquire_waits_on_the_pool_clock(clock: repute.ManualClock) -> None:
    pool = keys(clock)
    with pool.acquire("gpt") as lease:
        lease.report_failure("rate_limited", latency=0.1, retry_after=30.0)
    timer = threading.Timer(0.05, clock.advance, (30.0,))
    timer.start()
    lease = pool.acquire("gpt", timeout=60.0)
    timer.join()
    assert (lease.lease_kind, lease.granted_at) == ("client", 30.0)


def test_rate_limited_pauses_the_cell_for_exactly_retry_after(clock: repute.ManualClock) -> None:
    pool = keys(clock)
    with pool.acquire("gpt") as lease:
        lease.report_http(429, latency=0.05, headers={"Retry-After": "12"})
    cell = pool.cells("api-key", "k1")[1]
    assert (cell.state, cell.cause, cell.cooling_until, cell.consecutive_failures) == (
        "cooling",
        repute.FailureKind.RATE_LIMITED,
        12.0,
        0,
    )
    other = pool.try_acquire("claude")
    assert other is not None, "another model's cell is not paused"
    other.release()
    clock.advance(11.9)
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("gpt", timeout=0)
    assert caught.value.rate_limited == 1
    assert caught.value.retry_after == pytest.approx(0.1)
    clock.advance(0.1)
    assert pool.acquire("gpt").lease_kind == "client"


def test_report_http_reads_any_header_mapping_and_maps_statuses(clock: repute.ManualClock) -> None:
    pool = keys(clock)
    pool.report_http("api-key", "k1", "gpt", 429, headers=[("retry-after", "5")])
    assert pool.cells("api-key", "k1")[1].cooling_until == 5.0
    pool.report_http("api-key", "k1", "gpt", 200, latency=0.3)
    pool.report_http("api-key", "k1", "gpt", 404)
    assert pool.cells("api-key", "k1")[1].score == -1 + 5 + 5
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.report_http("api-key", "k1", "gpt", 99)
    assert (caught.value.field, caught.value.rule) == ("status", "must be an HTTP status code in 100..=599")
    with pytest.raises(repute.InvalidInputError) as caught:
        pool.report_http("api-key", "k1", "gpt", 429, headers=[1, 2])  # type: ignore[list-item]
    assert caught.value.field == "headers"


def test_a_dead_key_is_blocked_everywhere_until_unblocked(clock: repute.ManualClock) -> None:
    pool = keys(clock)
    list(pool.events())
    with pool.acquire("gpt") as lease:
        lease.report_http(401)
    blocked = [e for e in pool.events() if isinstance(e, repute.BlocklistedEvent)]
    assert [(e.value, e.context, e.until, e.reason) for e in blocked] == [("k1", None, None, "auth_failed")]
    clock.advance(10_000.0)
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("claude", timeout=0)
    assert (caught.value.blocked, caught.value.retry_after) == (1, None)
    assert pool.unblock("api-key", "k1")
    assert pool.try_acquire("claude") is not None


def test_a_spent_quota_pauses_the_key_for_every_model(clock: repute.ManualClock) -> None:
    pool = keys(clock)
    list(pool.events())
    pool.report_failure("api-key", "k1", "gpt", "quota_exhausted", latency=0.0, retry_after=3600.0)
    cooled = [e for e in pool.events() if isinstance(e, repute.CooledEvent)]
    assert [(e.context, e.until, e.cause) for e in cooled] == [(None, 3600.0, repute.FailureKind.QUOTA_EXHAUSTED)]
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("claude", timeout=0)
    assert (caught.value.rate_limited, caught.value.retry_after) == (1, 3600.0)
    with pytest.raises(repute.InvalidInputError) as bad:
        pool.report_failure("api-key", "k1", "gpt", "timeout", latency=0.0, retry_after=1.0)
    assert (bad.value.field, bad.value.rule) == ("retry_after", "only rate_limited and quota_exhausted take one")


def test_nothing_registered_is_named(clock: repute.ManualClock) -> None:
    pool = repute.Pool(clock=clock)
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("gpt", timeout=0)
    assert caught.value.none_registered
    assert "none registered" in str(caught.value)


def test_a_kind_nobody_registered_is_refused_at_once_not_waited_for(clock: repute.ManualClock) -> None:
    # Without a timeout the wait has no end, and the manual clock never
    # moves: only the refusal can end these calls.
    pool = repute.Pool(clock=clock)
    pool.register("proxy", "10.0.0.1:8080")
    with pytest.raises(repute.NoResourceAvailableError) as caught:
        pool.acquire("example.com", kind="proxies")
    assert (caught.value.none_registered, caught.value.settled, caught.value.retry_after) == (True, True, None)

    async def main() -> None:
        aio = await repute.AsyncPool.open(clock=clock)
        await aio.register("proxy", "10.0.0.1:8080")
        with pytest.raises(repute.NoResourceAvailableError) as refused:
            await aio.acquire("example.com", kind="proxies")
        assert refused.value.none_registered
        await aio.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_fail_open_grants_the_least_bad_and_says_so(clock: repute.ManualClock) -> None:
    pool = keys(clock, fail_open=True)
    pool.report_failure("api-key", "k1", "gpt", "rate_limited", latency=0.0, retry_after=60.0)
    lease = pool.acquire("gpt", timeout=0)
    assert (lease.value, lease.lease_kind) == ("k1", "fail_open")


def test_classic_and_probe_recovery_are_settings(clock: repute.ManualClock) -> None:
    for recovery, due in (("classic", True), ("probe", True), ("traffic", False)):
        pool = keys(clock, recovery=recovery)
        for _ in range(3):
            pool.report_failure("api-key", "k1", "gpt", "slow", latency=2.0)
        clock.advance(120.0)
        assert (pool.due_for_probe() != []) == due, recovery
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(recovery="sometimes")  # type: ignore[arg-type]
    assert (caught.value.field, caught.value.rule) == ("recovery", "must be one of traffic, probe, classic")


def test_cooling_rules_are_options_with_field_and_rule(clock: repute.ManualClock) -> None:
    pool = keys(clock, cooldowns={"timeout": {"base": 5.0, "cool_after": 1}})
    pool.report_failure("api-key", "k1", "gpt", "timeout", latency=1.0)
    assert pool.cells("api-key", "k1")[1].cooling_until == 5.0
    bad = [
        ({"timeout": {"base": 0.0}}, "policy.rules.base", "must be > 0 and at most 30 days"),
        ({"timeout": {"cool_after": 0}}, "policy.rules.cool_after", "must be >= 1"),
        ({"timeout": {"max_exponent": 22}}, "policy.rules.max_exponent", "must be in 0..=21"),
        ({"timeout": {"speed": 1}}, "cooldowns", "keys are base (seconds), cool_after and max_exponent"),
        ({"auth_failed": {"base": 1.0}}, "policy.rules", "auth_failed blocks and has no cooling rule"),
    ]
    for cooldowns, field, rule in bad:
        with pytest.raises(repute.InvalidInputError) as caught:
            repute.Pool(cooldowns=cooldowns)  # type: ignore[arg-type]
        assert (caught.value.field, caught.value.rule) == (field, rule), cooldowns
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(cooldowns={"melted": {"base": 1.0}})
    assert caught.value.field == "policy.rules.kind"


def _settle(pool: repute.Pool, check: object, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, [c.state for c in pool.cells("proxy", "good")]
        time.sleep(0.02)


# The probe that raises is reported as unraisable, as Python does for callbacks.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("style", ["sync", "async"])
def test_the_pool_runs_the_probe_loop_with_the_users_probe(clock: repute.ManualClock, style: str) -> None:
    seen: list[tuple[str, str, str]] = []

    def check(kind: str, value: str, context: str) -> bool:
        seen.append((kind, value, context))
        if value == "broken":
            raise RuntimeError("probe crashed")
        return value == "good"

    async def acheck(kind: str, value: str, context: str) -> bool:
        return check(kind, value, context)

    probe = check if style == "sync" else acheck
    pool = repute.Pool(clock=clock, strategy="first", recovery="probe", probe=probe, probe_every=0.02)
    for value in ("good", "bad", "broken"):
        pool.register("proxy", value)
        for _ in range(3):
            pool.report_failure("proxy", value, "shop", "timeout", latency=1.0)
    clock.advance(240.0)
    cell = lambda value: pool.cells("proxy", value)[1]  # noqa: E731
    _settle(pool, lambda: cell("good").state == "recovering" and cell("bad").consecutive_failures == 4)
    _settle(pool, lambda: cell("broken").consecutive_failures == 4)
    assert sorted(set(seen)) == [("proxy", v, "shop") for v in ("bad", "broken", "good")]
    assert (cell("bad").cause, cell("bad").cooling_until) == (repute.FailureKind.TIMEOUT, 240.0 + 480.0)
    assert pool.stats().live_leases == 0
    pool.close()


def test_a_probe_needs_probe_recovery() -> None:
    with pytest.raises(repute.InvalidInputError) as caught:
        repute.Pool(probe=lambda kind, value, context: True)
    assert (caught.value.field, caught.value.rule) == ("probe", 'goes with recovery="probe"')


def test_cooldowns_fill_in_from_the_pools_own_recovery(clock: repute.ManualClock) -> None:
    # Under the classic recovery a ban's base is an hour; an entry that sets
    # only cool_after keeps that base, not the traffic recovery's 300 s.
    pool = keys(clock, recovery="classic", cooldowns={"blocked": {"cool_after": 1}})
    pool.report_failure("api-key", "k1", "gpt", "blocked", latency=0.1)
    assert pool.cells("api-key", "k1")[1].cooling_until == 3600.0
