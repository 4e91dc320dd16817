#!/usr/bin/env bash
# The real-traffic harness: installs requirements.txt into the environment of
# the given Python (which should already have the `repute` binding; without
# it the repute contender is skipped) and runs run.py with the other args.
#   tests/realtraffic/run.sh .venv/bin/python --seeds 1,2 --world all
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${1:?usage: run.sh PYTHON [run.py arguments]}"
shift
if ! command -v tinyproxy >/dev/null; then
    echo "run.sh: tinyproxy is not installed (Debian: apt-get install tinyproxy)" >&2
    exit 1
fi
"$py" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
exec "$py" "$here/run.py" "$@"
