#!/usr/bin/env bash
# Print the path of a uv of the pinned version, installing it into .ci-tools/ (from
# PyPI, with pip) when this machine has none of that version.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.13.9
if command -v uv >/dev/null 2>&1 && [[ "$(uv --version)" == "uv $version "* ]]; then
    command -v uv
    exit 0
fi
if [[ ! -x .ci-tools/bin/uv ]] || [[ "$(.ci-tools/bin/uv --version)" != "uv $version "* ]]; then
    rm -rf .ci-tools
    python3 -m venv .ci-tools
    .ci-tools/bin/python -m pip install -q "uv==$version" >&2
fi
echo "$PWD/.ci-tools/bin/uv"
