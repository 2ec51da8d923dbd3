#!/bin/sh
# Install what the test suite needs (Python test extras; for the interop
# tests, a real Erlang node from Debian's erlang-nox, and erlang-src for the
# ttb.erl the ttb test compiles where observer is absent; for the report's browser
# test, Debian's chromium), then lint and run the whole suite.
set -e
cd "$(dirname "$0")/.."
if ! command -v erl >/dev/null 2>&1 ||
    { command -v dpkg >/dev/null 2>&1 && ! dpkg -s erlang-src >/dev/null 2>&1; }; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq erlang-nox erlang-src >/dev/null
    else
        echo "warning: cannot install erlang-nox and erlang-src: interop tests may skip" >&2
    fi
fi
# the report's browser test renders every report kind in Debian's chromium
if ! command -v chromium >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "warning: chromium not found and cannot install it: the report browser test will skip" >&2
    fi
fi
python3 -m pip install -q -e '.[test]'
# lint and format with the project's configuration (pyproject.toml [tool.ruff])
python3 -m ruff check .
python3 -m ruff format --check .
python3 -m mypy --strict smp/core smp/wire
# the docs site builds offline, with no broken link or missing reference
site=$(mktemp -d)
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict -q -d "$site"
rm -rf "$site"
python3 -m pytest -n 2 "$@"
