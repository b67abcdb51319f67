#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs the whole suite.
# Usage: bash scripts/test.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's Chromium drives the browser tests (Playwright never downloads a browser here).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-test.txt
# the project itself, editable: the README's package example then runs from any directory (tested)
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
exec .venv/bin/python -m pytest tests "$@"
