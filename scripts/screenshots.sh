#!/usr/bin/env bash
# Refreshes the README's screenshots: runs the browser tests with their screenshots going to assets/screenshots/
# (a normal test run writes them to the ignored .screenshots/). Needs what scripts/test.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
SCREENSHOT_DIR="$PWD/assets/screenshots" exec .venv/bin/python -m pytest tests/test_browser.py tests/test_browser_live.py tests/test_browser_why.py \
    tests/test_browser_heads.py tests/test_browser_query_key.py tests/test_browser_walkthrough.py "$@"
