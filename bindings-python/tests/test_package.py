"""The package's import surface: ``import repute`` alone, and its adapters on first use."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import repute


def test_an_adapter_loads_on_first_use_after_import_repute_alone() -> None:
    code = (
        "import sys, repute\n"
        "assert 'repute.httpx' not in sys.modules and 'httpx' not in sys.modules\n"
        "print(repute.httpx.Transport.__module__, repute.openai.client.__module__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["repute.httpx", "repute.openai"]


def test_a_name_that_is_no_adapter_is_no_attribute() -> None:
    with pytest.raises(AttributeError, match="module 'repute' has no attribute 'nonesuch'"):
        getattr(repute, "nonesuch")


def test_every_extra_is_an_adapter_and_every_adapter_an_extra() -> None:
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert set(extras) == set(repute._ADAPTERS)
    for name in extras:
        assert (Path(repute.__file__).parent / f"{name}.py").is_file(), name
