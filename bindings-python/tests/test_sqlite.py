"""SQLite persistence across two Python processes, and through kill -9."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest


def _run(script: str, *args: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


FIRST = """
    import json, os, sys
    import repute

    pool = repute.Pool(store="sqlite:" + sys.argv[1], tenant="shop", strategy="first")
    pool.register("proxy", "a")
    pool.register("proxy", "b")
    lease = pool.acquire("example.com")
    tokens = {lease.value: lease.token}
    lease.report_success(latency=0.2)
    lease.release()
    pool.checkpoint()
    # Acknowledged after the checkpoint: durable through the report log alone.
    pool.report_failure("proxy", "a", "example.com", "timeout", latency=1.5)
    pool.report_failure("proxy", "b", "example.com", "slow", latency=3.0)
    print(json.dumps({"tokens": tokens}))
    sys.stdout.flush()
    os._exit(0)  # die without closing: no final checkpoint
"""

SECOND = """
    import json, sys
    import repute

    pool = repute.Pool(store="sqlite:" + sys.argv[1], tenant="shop", seed=2)
    cells = {v: pool.cells("proxy", v)[1] for v in ("a", "b")}
    leases = [pool.acquire("example.com"), pool.acquire("example.com")]
    print(json.dumps({
        "resources": [r.value for r in pool.resources()],
        "observations": {v: c.observations for v, c in cells.items()},
        "scores": {v: c.score for v, c in cells.items()},
        "tokens": {l.value: l.token for l in leases},
    }))
    pool.close()
"""

HOLD = """
    import json, sys
    import repute

    try:
        repute.Pool(store="sqlite:" + sys.argv[1], tenant="shop")
    except repute.NotOwnerError as e:
        print(json.dumps({"error": e.code, "owner": e.owner}))
"""


def test_state_survives_a_process(tmp_path: Path) -> None:
    db = str(tmp_path / "repute.db")
    first = _run(FIRST, db)
    second = _run(SECOND, db)
    assert second["resources"] == ["a", "b"]
    # The checkpoint brought one success for "a"; the log replayed both failures.
    assert second["observations"] == {"a": 2, "b": 1}
    assert second["scores"] == {"a": 0, "b": -2}
    tokens = second["tokens"]
    assert isinstance(tokens, dict) and isinstance(first["tokens"], dict)
    for value, token in first["tokens"].items():
        assert tokens[value] > token  # fences keep rising across processes


def test_a_second_process_is_refused_while_the_first_owns_the_tenant(tmp_path: Path) -> None:
    import repute

    db = str(tmp_path / "repute.db")
    with repute.Pool(store="sqlite:" + db, tenant="shop"):
        refused = _run(HOLD, db)
    assert refused["error"] == "not_owner"
    assert "process" in str(refused["owner"])


HOLDER = """
    import json, sys, time
    import repute

    pool = repute.Pool(store="sqlite:" + sys.argv[1], tenant="shop", strategy="first", lease_ttl=2.0)
    pool.register("proxy", "a")
    pool.register("proxy", "b")
    a = pool.acquire("example.com")
    pool.checkpoint()  # lists the lease on a
    b = pool.acquire("example.com")  # after the checkpoint: only the permit table knows it
    a.release()  # after the checkpoint too
    print(json.dumps({"a": [a.value, a.token], "b": [b.value, b.token], "at": time.monotonic()}), flush=True)
    time.sleep(600)  # holding b until killed
"""


def test_a_process_killed_while_holding_a_lease_leaves_its_permit_held_until_the_ttl(tmp_path: Path) -> None:
    import repute

    db = str(tmp_path / "repute.db")
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), db], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
    finally:
        child.kill()  # SIGKILL: no close, no checkpoint
        child.wait()
    seen = json.loads(line)
    assert seen["a"][0] == "a" and seen["b"][0] == "b"

    with repute.Pool(store="sqlite:" + db, tenant="shop", strategy="first", lease_ttl=2.0) as pool:
        # The checkpoint's lease on a was released before the kill: it does not come back.
        assert pool.stats().live_leases == 0
        a = pool.acquire("example.com", timeout=0)
        assert (a.value, a.token) == ("a", seen["a"][1] + 1)
        a.release()
        pool.block("proxy", "a")
        # Only b is left to choose, and the killed process's lease holds it until its TTL ends.
        with pytest.raises(repute.NoResourceAvailableError):
            pool.acquire("example.com", timeout=0)
        b = pool.acquire("example.com", timeout=10)
        waited = time.monotonic() - seen["at"]
        assert (b.value, b.token) == ("b", seen["b"][1] + 1)
        assert 1.9 <= waited < 4.0, waited
