#!/usr/bin/env bash
# The Python binding's test command: builds and installs the `repute` package
# into <repo>/.venv (made if missing), checks that the committed stubs are the
# generated ones, then runs its pytest suite, which also runs mypy on the
# stubs. Needs Rust and python3 (3.10+) with venv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"
venv="$repo/.venv"

if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
py="$venv/bin/python"
# The maturin build backend runs the `maturin` executable from PATH; the
# stubs check runs its `generate-stubs`.
export PATH="$venv/bin:$PATH"
"$py" -m pip install --quiet --disable-pip-version-check --upgrade "maturin>=1.16,<2" pytest mypy
# The real libraries the adapters are tested with, pinned as the real-traffic
# harness pins them (tests/realtraffic/requirements.txt), in one install:
# LiteLLM alone would pull a newer openai. tinyproxy, which the adapter tests
# start, comes from the system's packages.
"$py" -m pip install --quiet --disable-pip-version-check \
    httpx==0.29.0 openai==3.57.0 anthropic==2.16.0 google-genai==3.3.0 aiohttp==3.14.5 "requests>=2.32,<3" \
    "types-requests>=2.32,<3" litellm==1.110.2 scrapy==2.19.0 crawlee==1.11.0
# maturin is already in the venv, so no isolated build environment is needed;
# it builds in release, sharing the workspace target directory with cargo.
# With the `etcd` feature, as every build of the test command, for the etcd
# owner tests (and one shared build of the dependencies).
MATURIN_PEP517_ARGS="--features etcd" \
    "$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps "$here"

cd "$here"
# The committed stubs must be what the Rust source and the code table give.
"$py" stubgen.py --check
set +e
"$py" -m pytest -p no:cacheprovider tests "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "bindings-python: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
