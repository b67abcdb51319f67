#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs the whole suite.
# Usage: bash scripts/test.sh [--fast] [extra pytest arguments]
#   --fast   the quick lane while working: no browser, slow (app server, several processes) or kernel tests,
#            and no Chromium install; CI runs everything
set -euo pipefail
cd "$(dirname "$0")/.."
lane=()
if [[ ${1:-} == --fast ]]; then
  shift
  lane=(-m "not browser and not slow and not kernel")
fi

# Debian's Chromium drives the browser tests (Playwright never downloads a browser here).
if [[ ${#lane[@]} -eq 0 ]] && ! command -v chromium >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-test.txt
# the project itself, editable: the README's package example then runs from any directory (tested)
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -e .
exec .venv/bin/python -m pytest tests "${lane[@]}" "$@"
