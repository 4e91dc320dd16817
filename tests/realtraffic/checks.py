"""What the test command holds repute to on real traffic, judged from the
world's own counts (never from timings, which the machine's load moves).

Only what repute meets on every seed measured is a check here; the rest of
the table (the proxies world, wall times) is reported, not asserted, and
the issue tracker says where it falls short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class RowLike(Protocol):
    world: str
    contender: str
    seed: int
    served: float
    r429: int
    after_401: int | None
    after_quota: int | None
    skipped: str | None
    errors: list[str]


SERVED_SLACK = 0.01
"""How far below the best other contender repute's served share may be: one
request in a hundred, for an attempt a loaded machine lets run past its
deadline."""


REPUTES = ("repute", "repute-adapter")
"""repute as the harness drives it by hand, and through its adapters."""


def violations(rows: Sequence[RowLike]) -> tuple[int, list[str]]:
    """The checks run and the ones that failed, each named with its world,
    seed and numbers. Both ways of driving repute are held to the same
    checks; the adapters also serve within `SERVED_SLACK` of the hand loop."""
    checked, failed = 0, []

    def check(ok: bool, what: str) -> None:
        nonlocal checked
        checked += 1
        if not ok:
            failed.append(what)

    for row in rows:
        if row.contender not in REPUTES:
            continue
        where = f"{row.world} seed {row.seed}"
        check(row.skipped is None, f"{where}: {row.contender} did not run ({row.skipped})")
        check(not row.errors, f"{where}: {row.contender} raised {row.errors[:3]}")
    keys = ("keys", "anthropic")
    for row in (r for r in rows if r.contender in REPUTES and r.world in keys and r.skipped is None):
        where = f"{row.world} seed {row.seed}: {row.contender}"
        same = [r for r in rows if r.world == row.world and r.seed == row.seed and not r.skipped]
        others = [r for r in same if r.contender not in REPUTES]
        best = max((r.served for r in others), default=0.0)
        check(row.served >= best - SERVED_SLACK, f"{where} served {row.served:.1%}, another {best:.1%}")
        for glue in (r for r in same if r.contender == "repute" and row.contender != "repute"):
            check(
                row.served >= glue.served - SERVED_SLACK,
                f"{where} served {row.served:.1%}, repute by hand {glue.served:.1%}",
            )
        for other in (r for r in others if r.contender in ("careful-rr", "litellm")):
            check(
                row.r429 < other.r429,
                f"{where} drew {row.r429} answers of 429, {other.contender} {other.r429}",
            )
        check(row.after_401 == 0, f"{where}: {row.after_401} attempts on the revoked key after its 401")
        check(row.after_quota == 0, f"{where}: {row.after_quota} attempts on the out-of-quota key after its quota error")
    return checked, failed
