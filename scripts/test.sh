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

# the float16-weight kernel, compiled once before anything uses it (the tests then load the cached build)
.venv/bin/python -c "from transformer.core.half_linear import KERNEL; KERNEL.wait(); print('float16 kernel:', KERNEL.status)"

# the live view's data module (explorer/static/live_data.js) under Node's own test runner, against a fixture
# Python computes from a real translation
if ! command -v node >/dev/null 2>&1; then
  SUDO=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs >/dev/null
fi
fixtures=$(mktemp -d)
trap 'rm -rf "$fixtures"' EXIT
# (without the float16 kernel: this short process would only start its build and end)
ATTENTION_EXPLORER_HALF_WEIGHTS=0 .venv/bin/python tests/js/export_fixtures.py "$fixtures/live.json"
LIVE_FIXTURE="$fixtures/live.json" node --test tests/js/

.venv/bin/python -m pytest tests "${lane[@]}" "$@"
