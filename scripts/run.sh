#!/usr/bin/env bash
# Sets up a virtual environment with the app's dependencies and serves the app on the shipped checkpoints.
# Honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860). Every step prints what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh

if [ ! -x .venv/bin/python ]; then
  step "creating the virtual environment in .venv"
  python3 -m venv .venv
fi
step "installing Python packages from requirements.txt (first run: torch ~190 MB as the CPU wheel, a few minutes)..."
heartbeat "installing Python packages" pip_install -r requirements.txt
# compiled here, once, so the app starts on it (a machine without a C++ compiler decodes on float32 weights)
step "compiling the float16 kernel (first run: about a minute; cached afterwards)..."
heartbeat "compiling the float16 kernel" build_kernel
step "serving on http://${GRADIO_SERVER_NAME:-127.0.0.1}:${GRADIO_SERVER_PORT:-7860} (loading the models takes a few seconds; Ctrl-C stops it)"
exec .venv/bin/python app.py "$@"
