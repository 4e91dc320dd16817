"""The generated stubs, checked by mypy against a typed example and the package."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
PACKAGE = HERE.parent / "python" / "repute"


# One cache for the module's runs: the SDKs' types (openai, anthropic) are
# read once, not by every run.
_CACHE = tempfile.TemporaryDirectory(prefix="repute-mypy-")


def _mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", _CACHE.name, *args],
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


def test_adapters_are_typed(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(
        "import aiohttp, httpx, httpx2, requests, openai, anthropic\n"
        "from google import genai\n"
        "import repute, repute.httpx, repute.httpx2, repute.requests, repute.aiohttp\n"
        "import repute.openai, repute.anthropic, repute.genai\n"
        "pool = repute.Pool()\n"
        "client = httpx.Client(transport=repute.httpx.Transport(pool, kind='proxy', where={'tier': 'a'}))\n"
        "aclient = httpx.AsyncClient(transport=repute.httpx.AsyncTransport(pool, context=lambda r: r.url.host))\n"
        "client2 = httpx2.Client(transport=repute.httpx2.Transport(pool, attempts=2, timeout=5.0))\n"
        "gpt: openai.OpenAI = repute.openai.client(pool, base_url='http://127.0.0.1/v1')\n"
        "claude: anthropic.AsyncAnthropic = repute.anthropic.async_client(pool, deadline=30.0)\n"
        "gemini: genai.Client = repute.genai.client(pool, http_options={'base_url': 'http://127.0.0.1'})\n"
        "session = requests.Session()\n"
        "session.mount('https://', repute.requests.Adapter(pool, kind='proxy', max_proxies=8))\n"
        "mw: aiohttp.ClientMiddlewareType = repute.aiohttp.middleware(pool, kind='proxy')\n"
    )
    bad = tmp_path / "bad_adapters.py"
    bad.write_text(
        "import httpx, requests\n"
        "import repute, repute.httpx, repute.httpx2, repute.requests, repute.aiohttp, repute.openai, repute.genai\n"
        "pool = repute.Pool()\n"
        "repute.httpx.Transport(pool, attempts='3')\n"
        "repute.httpx2.Transport(pool, context=5)\n"
        "repute.requests.Adapter(pool, kind=1)\n"
        "repute.aiohttp.middleware(pool, timeout='soon')\n"
        "repute.openai.client('memory')\n"
        "repute.genai.client(pool, deadline='soon')\n"
        "httpx.Client(transport=repute.httpx2.Transport(pool))\n"
    )
    # One run for both files: mypy reads the SDKs' types once.
    done = _mypy(str(good), str(bad))
    assert done.returncode == 1
    errors = [line for line in done.stdout.splitlines() if "error:" in line]
    assert len(errors) == 7 and all(line.startswith(str(bad)) for line in errors), done.stdout
