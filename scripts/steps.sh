# Sourced by run.sh and test.sh: each step says what it does, and a long one says every 10 s that it is still going.

step() {  # step MESSAGE: one line that says what comes next
  printf '==> %s\n' "$*"
}

heartbeat() {  # heartbeat LABEL COMMAND...: runs COMMAND and prints the time elapsed every 10 s until it ends
  local label=$1
  shift
  (
    started=$SECONDS
    while sleep 10 && kill -0 $$ 2>/dev/null; do  # stops with the script, should the script be interrupted
      printf '    ... %s: %d s\n' "$label" $((SECONDS - started))
    done
  ) &
  local ticker=$! status=0
  "$@" || status=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$status"
}

pip_install() {  # pip_install ARGS...: pip with its progress shown as it happens (unbuffered: piped, Python's output
  # otherwise arrives in one burst at the end), without a line per requirement already there
  PYTHONUNBUFFERED=1 .venv/bin/python -m pip install --disable-pip-version-check --progress-bar on "$@" \
    | awk '!/^Requirement already satisfied/ { print; fflush() }'
}

build_kernel() {  # the float16-weight kernel, compiled once (cached under ~/.cache/torch_extensions), ninja's steps shown
  .venv/bin/python -c "import sys; from transformer.core.kernel_build import main; sys.exit(main())"
}
