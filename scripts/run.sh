#!/usr/bin/env bash
# Sets up a virtual environment with the app's dependencies and serves the app on the shipped checkpoint.
# Honours GRADIO_SERVER_NAME / GRADIO_SERVER_PORT (default 127.0.0.1:7860).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
# the float16-weight kernel, compiled once here (cached under ~/.cache/torch_extensions) so the app starts on it
.venv/bin/python -c "from transformer.core.half_linear import KERNEL; KERNEL.wait(); print('float16 kernel:', KERNEL.status)"
exec .venv/bin/python app.py "$@"
