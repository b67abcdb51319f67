#!/usr/bin/env bash
# Checks that requirements.txt installs the way a Hugging Face Space installs it: in a fresh Python 3.11
# virtual environment under a temporary folder, the Spaces builder's one resolve
#   pip install -r requirements.txt "gradio[oauth,mcp]==6.31.0" "uvicorn>=0.14.0" "websockets>=10.4" spaces
# then `pip check`. Exits non-zero when either fails; prints what it checked and which torch build it got.
#
# The install uses this machine's pip configuration: where that offers a local CPU wheel of torch 2.13.0
# (pip's find-links, as on this project's machines) the exact pin takes it; elsewhere it takes PyPI's
# torch 2.13.0, which on Linux x86_64 is the CUDA build with its nvidia-* packages, as on a Space.
#
#   --pypi   also resolve against PyPI alone (no local wheels, no pip configuration) with --dry-run, and
#            list what a Space downloads, with the wheel sizes pip reports
#
# Usage: bash scripts/check_requirements.sh [--pypi]      (PYTHON=python3.11 by default)
set -euo pipefail
cd "$(dirname "$0")/.."

PYPI=0
case "${1:-}" in
  "") ;;
  --pypi) PYPI=1 ;;
  *) echo "usage: bash scripts/check_requirements.sh [--pypi]" >&2; exit 2 ;;
esac

PYTHON=${PYTHON:-python3.11}
GRADIO_VERSION=$(sed -n 's/^sdk_version: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' README.md)
[ -n "$GRADIO_VERSION" ] || { echo "no sdk_version in README.md's front matter" >&2; exit 1; }
SPACE_REQUIREMENTS=(-r requirements.txt "gradio[oauth,mcp]==$GRADIO_VERSION" "uvicorn>=0.14.0" "websockets>=10.4" spaces)

"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "$PYTHON is not Python 3.11 (README.md's python_version); set PYTHON=" >&2; exit 1; }
SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
"$PYTHON" -m venv "$SCRATCH/venv"
PIP=("$SCRATCH/venv/bin/python" -m pip --disable-pip-version-check)

echo "== fresh venv: $("$SCRATCH/venv/bin/python" -V), $("${PIP[@]}" --version | cut -d' ' -f1-2)"
echo "== pip install ${SPACE_REQUIREMENTS[*]}"
"${PIP[@]}" install -q "${SPACE_REQUIREMENTS[@]}"
echo "== pip check"
"${PIP[@]}" check
"$SCRATCH/venv/bin/python" - <<'EOF'
from importlib.metadata import distributions, version
cuda = sorted(d.metadata["Name"] for d in distributions() if d.metadata["Name"].lower().startswith(("nvidia-", "cuda-")))
torch = version("torch")
print(f"== installed: torch {torch} ({'CPU build' if '+cpu' in torch else 'PyPI build'}), gradio {version('gradio')}, "
      f"{len(list(distributions()))} distributions, {len(cuda)} nvidia/cuda packages")
EOF

if [ "$PYPI" = 1 ]; then
  echo "== PyPI alone, --dry-run (what a Space downloads)"
  env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL PIP_CONFIG_FILE=/dev/null \
    "${PIP[@]}" install --dry-run --ignore-installed --index-url https://pypi.org/simple \
    --report "$SCRATCH/report.json" "${SPACE_REQUIREMENTS[@]}" > "$SCRATCH/pypi.log"
  "$SCRATCH/venv/bin/python" - "$SCRATCH/report.json" "$SCRATCH/pypi.log" <<'EOF'
import json, re, sys
report, log = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
units = {"bytes": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}
sizes = {name: float(n) * units[unit]  # pip prints each wheel's size as it collects it
         for name, n, unit in re.findall(r"(?:Downloading|Using cached) (\S+) \(([\d.]+) (bytes|kB|MB|GB)\)", log)}
files = {item["metadata"]["name"]: item["download_info"]["url"].rsplit("/", 1)[-1] for item in report["install"]}
cuda = [n for n in files if n.lower().startswith(("nvidia-", "cuda-"))]
size = lambda names: sum(sizes.get(files[n], 0) for n in names) / 1e9
torch = next(i["metadata"]["version"] for i in report["install"] if i["metadata"]["name"] == "torch")
print(f"{len(files)} packages, {size(files):.2f} GB of wheels, of which torch {torch}, triton and "
      f"{len(cuda)} nvidia/cuda packages {size(['torch', 'triton', *cuda] if 'triton' in files else ['torch', *cuda]):.2f} GB")
unsized = [n for n in files if files[n] not in sizes]
if unsized:
    print(f"(no size printed for {len(unsized)}: {', '.join(sorted(unsized))})")
EOF
fi
echo "OK: requirements.txt resolves with the Spaces builder's packages and pip check passes"
