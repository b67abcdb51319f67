#!/usr/bin/env bash
# Retrains a shipped model in the stages it was trained in. Both start from one mixed training folder (Tatoeba's
# everyday pairs once and Multi30k's captions twice: `python -m transformer.data mix`); stage 1 trains from random
# weights, and En→De's stage 2 warm-starts from its stage 1 at a lower learning rate (a single command cannot redo
# a warm-started model, which is why the stages are named here). Stage 1 of both shipped models ran on one NVIDIA
# H100, 3.5 minutes each (DEVICE=cuda); on a 2-core CPU a stage-1 run takes about 5 hours, and En→De's stage 2
# about 30 minutes per epoch.
#
#   bash scripts/reproduce.sh en-de [RUNS_FOLDER]      # or de-en; RUNS_FOLDER defaults to runs
#   DEVICE=cuda bash scripts/reproduce.sh en-de         # train on the GPU
#   MAX_MINUTES=150 bash scripts/reproduce.sh en-de     # stop cleanly after 150 minutes of the current stage
#   DRY_RUN=1 bash scripts/reproduce.sh en-de           # print the commands, run nothing
#   CORPORA=/data bash scripts/reproduce.sh en-de       # the folder holding tatoeba/ and multi30k/ (../shared/data)
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
corpora=${CORPORA:-../shared/data}
if [[ -n ${MAX_MINUTES:-} && ! ${MAX_MINUTES} =~ ^[0-9]+([.][0-9]+)?$ ]]; then
    echo "MAX_MINUTES must be a positive number of minutes, got '${MAX_MINUTES}'" >&2
    exit 2
fi
if [[ -n ${DEVICE:-} && ! ${DEVICE} =~ ^(cpu|cuda)$ ]]; then
    echo "DEVICE must be cpu or cuda, got '${DEVICE}'" >&2
    exit 2
fi

mix=$runs/mix
first="--n-layers 4 --vocab-size 12000 --dropout 0.2 --epochs 300 --max-tokens 8000 --warmup 800"
# per stage: folder, updates, flags besides --out and --max-updates (train --help's defaults fill in the rest)
case $pair in
    en-de) stages=(
        "en-de-s1|3056|--data-dir $mix --src en --tgt de $first"
        "en-de-s2|2330|--data-dir $mix --src en --tgt de --init-from $runs/en-de-s1 --dropout 0.2 --epochs 40 --max-tokens 8000 --lr 0.0006 --warmup 300 --average 2") ;;
    de-en) stages=(
        "de-en|3022|--data-dir $mix --src de --tgt en $first") ;;
    *) echo "the first argument names the shipped model to retrain: en-de or de-en, got '$pair'" >&2
       exit 2 ;;
esac
if [[ -z ${DRY_RUN:-} && ! -d $corpora/tatoeba && ! -f $mix/mix.json ]]; then
    echo "no corpora at $corpora (tatoeba/ and multi30k/): set CORPORA to the folder that holds them" >&2
    exit 2
fi

finished_updates() {  # the updates recorded in a stage's metrics.json, 0 when it has none
    "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["training"]["updates"])' "$1/metrics.json" \
        2>/dev/null || echo 0
}

# the mixed training folder, built once; val holds both corpora's val splits, the tests stay in their folders
mix_command=("$python" -m transformer.data mix --out "$mix" "$corpora/tatoeba" "$corpora/multi30k" --repeat 1 2)
if [[ -n ${DRY_RUN:-} ]]; then
    echo "${mix_command[*]}"
elif [[ ! -f $mix/mix.json ]]; then
    "${mix_command[@]}"
fi

device=()
[[ -n ${DEVICE:-} ]] && device=(--device "$DEVICE")
for stage in "${stages[@]}"; do
    IFS='|' read -r name updates flags <<<"$stage"
    out="$runs/$name"
    finished=$(finished_updates "$out")
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
    "${command[@]}" "${device[@]}" "${budget[@]}"
    if [[ $(finished_updates "$out") != "$updates" ]]; then
        echo "$out stopped before its $updates updates: run this script again to go on" >&2
        exit 3
    fi
done
[[ -n ${DRY_RUN:-} ]] || echo "the model is $runs/${stages[-1]%%|*}"
