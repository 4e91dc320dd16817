"""SQLite persistence across two Python processes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path


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
    except repute.NotOwner as e:
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
