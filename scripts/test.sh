#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then builds the docs, lints and runs the whole suite.
# Usage: bash scripts/test.sh [--fast] [extra pytest arguments]
#   --fast   the quick lane while working: no browser, slow (app server, several processes) or kernel tests,
#            and no Chromium install; CI runs everything
# Every step prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
lane=()
if [[ ${1:-} == --fast ]]; then
  shift
  lane=(-m "not browser and not slow and not kernel")
fi

apt_install() {  # apt_install PACKAGE: Debian's package, as root or through sudo
  local sudo
  sudo=$([ "$(id -u)" -eq 0 ] && echo "" || echo "sudo")
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$1" >/dev/null
}

# Debian's Chromium drives the browser tests (Playwright never downloads a browser here).
if [[ ${#lane[@]} -eq 0 ]] && ! command -v chromium >/dev/null 2>&1; then
  step "installing Debian's chromium with apt-get (first run: about 100 MB)..."
  heartbeat "installing chromium" apt_install chromium
fi

if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment in .venv"
  python3 -m venv .venv
fi
# --no-compile: pip would spend about 45 s compiling every installed module to byte code; Python compiles the few
# the tests import on first use instead (about 6 s), and caches them: hence byte code is written whatever the caller's
# environment says
unset PYTHONDONTWRITEBYTECODE
step "installing Python packages from requirements-test.txt (first run: torch ~190 MB as the CPU wheel, a few minutes)..."
heartbeat "installing Python packages" pip_install --no-compile -r requirements-test.txt
# the project itself, editable: the README's package example then runs from any directory (tested)
step "installing the project itself (editable)..."
heartbeat "installing the project" pip_install --no-deps -e .

# compiled once before anything uses it (the tests then load the cached build)
step "compiling the float16 kernel (first run: about a minute; cached afterwards)..."
heartbeat "compiling the float16 kernel" build_kernel

# the reference site, strictly: a broken link, a missing anchor or a page left out of the nav fails; built into a
# temporary folder so nothing is left in the tree
site=$(mktemp -d)
fixtures=$(mktemp -d)
trap 'rm -rf "$site" "$fixtures"' EXIT
step "building the docs (mkdocs build --strict)..."
NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --site-dir "$site"

step "linting (ruff check)..."
.venv/bin/python -m ruff check --output-format concise .

# the live view's data module (explorer/static/live_data.js) under Node's own test runner, against a fixture
# Python computes from a real translation
if ! command -v node >/dev/null 2>&1; then
  step "installing Node with apt-get..."
  heartbeat "installing nodejs" apt_install nodejs
fi
js_tests() {
  step "testing the live view's browser code (node --test)..."
  # (without the float16 kernel: this short process would only start its build and end)
  ATTENTION_EXPLORER_HALF_WEIGHTS=0 .venv/bin/python tests/js/export_fixtures.py "$fixtures/live.json"
  LIVE_FIXTURE="$fixtures/live.json" node --test tests/js/
}

# torch with one thread per process, as the app runs it (explorer/__init__.py): on 2 cores shared with Chromium, the
# in-process server and the subprocesses, a second OpenMP thread mostly waits for a core (four of the model's test
# files: 28 s with two threads, 16 s with one, on the busy machine); tests of several threads set their own counts
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
if [[ ${#lane[@]} -gt 0 || $# -gt 0 ]]; then
  js_tests
  step "running pytest ${lane[*]} $*..."
  .venv/bin/python -m pytest tests "${lane[@]}" "$@"
  exit
fi
# The whole suite in two processes at once, one per core: the browser tests (a browser, a server and their waits)
# beside all the others. The browser lane was the longer by about a quarter: its longest walk (marked
# beside_others: the accessibility walk) runs in the other lane, with a browser and a server of its own there. Each
# has its own temporary folder and its own range of ports for the servers it starts (Gradio tries 100 from
# GRADIO_SERVER_PORT); the browser tests' output follows the others'. Each lane lists its 25 slowest tests
# (--durations=25): where the time goes, run after run. The browser code's own tests (node) open the browser lane,
# the shorter one.
lanes=$(mktemp -d)
trap 'rm -rf "$site" "$fixtures" "$lanes"' EXIT
browser_lane() {
  local js=0 tests=0
  js_tests || js=$?
  GRADIO_SERVER_PORT=8060 .venv/bin/python -m pytest tests -m "browser and not beside_others" --durations=25 \
    --basetemp "$lanes/browser" || tests=$?
  [[ $js -eq 0 && $tests -eq 0 ]]
}
step "running pytest in two processes at once: the browser tests, and every other test..."
browser_lane >"$lanes/browser.log" 2>&1 &
browser=$!
others=0
GRADIO_SERVER_PORT=7860 .venv/bin/python -m pytest tests -m "not browser or beside_others" --durations=25 \
  --basetemp "$lanes/others" || others=$?
browsers=0
wait "$browser" || browsers=$?
step "the browser code's and the browser tests' output (status $browsers):"
cat "$lanes/browser.log"
step "pytest: every other test's status $others, the browser tests' $browsers"
[[ $others -eq 0 && $browsers -eq 0 ]]
