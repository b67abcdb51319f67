#!/usr/bin/env bash
# Retrains the shipped En→De model in the stages it was trained in: each stage warm-starts from the one before
# (train's defaults alone cannot redo a warm-started model). About 5 hours on a 2-core CPU.
#
#   bash scripts/reproduce_en_de.sh [RUNS_FOLDER]      # default: runs
#   MAX_MINUTES=150 bash scripts/reproduce_en_de.sh     # stop cleanly after 150 minutes of the current stage
#   DRY_RUN=1 bash scripts/reproduce_en_de.sh           # print the stage commands, run nothing
#
# Run it again to go on: a stage that was stopped resumes exactly where it was (train --resume), and a stage
# whose metrics.json records all its updates is skipped. Each stage's --max-updates is the number of updates
# that stage made when the shipped model was trained. The last stage's folder is the model.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-runs}
python=${PYTHON:-python}
[[ -x .venv/bin/python && -z ${PYTHON:-} ]] && python=.venv/bin/python
if [[ -n ${MAX_MINUTES:-} && ! ${MAX_MINUTES} =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "MAX_MINUTES must be a positive number of minutes, got '${MAX_MINUTES}'" >&2
    exit 2
fi

# folder, updates, flags (besides --out, --max-updates and the defaults of train --help)
stages=(
    "en-de-v1|6448|--dropout 0.2 --attention-dropout 0"
    "en-de-warm|4202|--init-from $runs/en-de-v1 --lr 8e-4 --warmup 300"
)

finished_updates() {  # the updates recorded in a stage's metrics.json, 0 when it has none
    "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["training"]["updates"])' "$1/metrics.json" \
        2>/dev/null || echo 0
}

for stage in "${stages[@]}"; do
    IFS='|' read -r name updates flags <<<"$stage"
    out="$runs/$name"
    budget=()
    [[ -n ${MAX_MINUTES:-} ]] && budget=(--max-minutes "$MAX_MINUTES")
    # shellcheck disable=SC2206  # the flags are words on purpose
    command=("$python" -m transformer.train --src en --tgt de --out "$out" $flags --max-updates "$updates")
    [[ -d $out/resume ]] && command=("$python" -m transformer.train --resume "$out" --max-updates "$updates")
    if [[ -n ${DRY_RUN:-} ]]; then
        echo "${command[*]}"
        continue
    fi
    if [[ $(finished_updates "$out") == "$updates" ]]; then
        echo "$out: done ($updates updates)"
        continue
    fi
    "${command[@]}" "${budget[@]}"
    if [[ $(finished_updates "$out") != "$updates" ]]; then
        echo "$out stopped before its $updates updates: run this script again to go on" >&2
        exit 3
    fi
done
[[ -n ${DRY_RUN:-} ]] || echo "the model is $runs/${stages[-1]%%|*}"
