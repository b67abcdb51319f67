#!/usr/bin/env bash
# Retrains a shipped model in the stages it was trained in: each stage warm-starts from the one before
# (train's defaults alone cannot redo a warm-started model). En→De takes about 7 hours on a 2-core CPU, De→En 2.
# En→De's last stage trains on a diversified training split (transformer.diversify): before it, the stage before
# has its length penalty tuned on val and translates the sources, and the shipped De→En model the targets back.
#
#   bash scripts/reproduce.sh en-de [RUNS_FOLDER]      # or de-en; RUNS_FOLDER defaults to runs
#   MAX_MINUTES=150 bash scripts/reproduce.sh en-de     # stop cleanly after 150 minutes of the current stage
#   DRY_RUN=1 bash scripts/reproduce.sh en-de           # print the stage commands, run nothing
#
# Run it again to go on: a stage that was stopped resumes exactly where it was (train --resume), and a stage
# whose metrics.json records all its updates is skipped. Each stage's --max-updates is the number of updates
# that stage made when the shipped model was trained. The last stage's folder is the model.
set -euo pipefail
cd "$(dirname "$0")/.."
pair=${1:-}
runs=${2:-runs}
python=${PYTHON:-python}
[[ -x .venv/bin/python && -z ${PYTHON:-} ]] && python=.venv/bin/python
if [[ -n ${MAX_MINUTES:-} && ! ${MAX_MINUTES} =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "MAX_MINUTES must be a positive number of minutes, got '${MAX_MINUTES}'" >&2
    exit 2
fi

# per stage: folder, updates, flags besides --out and --max-updates (train --help's defaults fill in the rest)
case $pair in
    en-de) stages=(
        "en-de-v1|6448|--src en --tgt de --dropout 0.2 --attention-dropout 0"
        "en-de-warm|4202|--src en --tgt de --init-from $runs/en-de-v1 --lr 8e-4 --warmup 300"
        "en-de-div|5498|--src en --tgt de --data-dir $runs/diversified-en-de --init-from $runs/en-de-warm --lr 5e-4 --warmup 300") ;;
    de-en) stages=(
        "de-en-v1|2762|--src de --tgt en --dropout 0.2 --attention-dropout 0"
        "de-en-warm|3833|--src de --tgt en --init-from $runs/de-en-v1 --epochs 60 --lr 8e-4 --warmup 300") ;;
    *) echo "the first argument names the shipped model to retrain: en-de or de-en, got '$pair'" >&2
       exit 2 ;;
esac

finished_updates() {  # the updates recorded in a stage's metrics.json, 0 when it has none
    "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["training"]["updates"])' "$1/metrics.json" \
        2>/dev/null || echo 0
}

run() {  # a step besides training: printed on a dry run, run otherwise
    if [[ -n ${DRY_RUN:-} ]]; then echo "$*"; else "$@"; fi
}

prepare() {  # what a stage needs before it trains: a diversified training split, built once
    [[ $1 == *-div ]] || return 0
    local data="$runs/diversified-$pair" before="$2"
    [[ -f $data/train.${pair%-*} ]] && return 0
    run "$python" -m transformer.tune_length_penalty --checkpoint "$before"
    run "$python" -m transformer.diversify --forward "$before" --backward "checkpoints/${pair#*-}-${pair%-*}" \
        --out "$data"
}

before=
for stage in "${stages[@]}"; do
    IFS='|' read -r name updates flags <<<"$stage"
    out="$runs/$name"
    finished=$(finished_updates "$out")
    [[ $finished == "$updates" ]] || prepare "$name" "$before"
    before=$out
    budget=()
    [[ -n ${MAX_MINUTES:-} ]] && budget=(--max-minutes "$MAX_MINUTES")
    # shellcheck disable=SC2206  # the flags are words on purpose
    command=("$python" -m transformer.train --out "$out" $flags --max-updates "$updates")
    [[ -d $out/resume ]] && command=("$python" -m transformer.train --resume "$out" --max-updates "$updates")
    if [[ -n ${DRY_RUN:-} ]]; then
        echo "${command[*]}"
        continue
    fi
    if [[ $finished == "$updates" ]]; then
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
