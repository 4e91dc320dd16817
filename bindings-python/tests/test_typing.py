"""The generated stubs, checked by mypy against a typed example and the package."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
PACKAGE = HERE.parent / "python" / "repute"


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as cache:
        return subprocess.run(
            [sys.executable, "-m", "mypy", "--strict", "--cache-dir", cache, *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=HERE,
        )


def test_typed_example_passes_mypy_strict() -> None:
    done = _mypy("typed_example.py")
    assert done.returncode == 0, done.stdout + done.stderr


def test_package_sources_pass_mypy_strict() -> None:
    done = _mypy(str(PACKAGE))
    assert done.returncode == 0, done.stdout + done.stderr


def test_typed_example_runs() -> None:
    done = subprocess.run([sys.executable, str(HERE / "typed_example.py")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_stubs_catch_misuse(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import repute\n"
        "pool = repute.Pool()\n"
        "pool.register(1, 'v')\n"
        "lease: repute.Lease = pool.try_acquire('c')\n"
        "pool.block('k', 'v', seconds='soon')\n"
        "pool.register('k', 'v', labels={'tier': 1})\n"
        "pool.acquire('c', where={'tier': 1})\n"
        "secret: str = pool.acquire('c').secret\n"
        "pool.register('k', 'v', rpm='60')\n"
        "pool.acquire('c', cost=1.5)\n"
        "retired: bool = pool.resources()[0].retired\n"
    )
    done = _mypy(str(bad))
    assert done.returncode == 1
    assert done.stdout.count("error:") == 9, done.stdout
