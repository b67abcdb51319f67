#!/usr/bin/env bash
# One GPU window, both teachers: trains an En→De and a De→En teacher side by side on one GPU, each stopping cleanly
# at its time budget, then has each translate every training source of the corpus mix (beam 4, batched) into
# compressed files small enough to copy back. The students are trained afterwards on any CPU (docs/training.md).
#
#   bash scripts/pack_distill.sh                       # here, first: gathers the corpora (and wheels) into .distill/
#   bash scripts/distill_gpu.sh --out OUT              # on the GPU machine (PyTorch, no network needed)
#   bash scripts/distill_gpu.sh --device cpu --out OUT # a test run on a CPU (give tiny TEACHER_FLAGS)
#
# Options: --device cuda|cpu (cuda), --out DIR (.distill/distilled: what to copy back), --work DIR (.distill/work:
# the mix and the teachers, which stay), --corpora DIR (.distill/corpora when packed, else ../shared/data),
# --train-minutes M (5.5: each teacher's training budget), --total-minutes M (10.5: the whole run's; translation
# gets what training leaves, less a margin). TEACHER_FLAGS replaces the teachers' shape and optimisation flags,
# TRANSLATE_FLAGS adds flags to `transformer.distill translate`, PYTHON names the interpreter.
#
# OUT/en-de and OUT/de-en each get CORPUS.train.TGT.gz per corpus of the mix (the teacher's translations, line N of
# CORPUS/train.SRC) and teacher.json (the teacher's val and test scores, its command, hardware and minutes, how far
# translation got). Everything is written as it goes: a run cut short leaves usable files, and running the script
# again continues (a trained teacher is kept; translation resumes at its last chunk).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh

device=cuda out=.distill/distilled work=.distill/work corpora=
train_minutes=5.5 total_minutes=10.5
while (($#)); do
    case $1 in
        --device|--out|--work|--corpora|--train-minutes|--total-minutes)
            [[ $# -ge 2 ]] || { echo "error: $1 needs a value" >&2; exit 2; }
            name=${1#--}
            printf -v "${name//-/_}" '%s' "$2"
            shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
[[ $device =~ ^(cpu|cuda)$ ]] || { echo "error: --device must be cpu or cuda, got '$device'" >&2; exit 2; }
for name in train_minutes total_minutes; do
    value=${!name}
    if [[ ! $value =~ ^[0-9]+([.][0-9]+)?$ ]] || [[ $value =~ ^0+([.]0*)?$ ]]; then
        echo "error: --${name//_/-} must be a positive number of minutes, got '$value'" >&2
        exit 2
    fi
done
if awk -v t="$train_minutes" -v all="$total_minutes" 'BEGIN { exit !(t >= all) }'; then
    echo "error: --train-minutes ($train_minutes) must be less than --total-minutes ($total_minutes): translation" \
        "needs the rest" >&2
    exit 2
fi
if [[ -z $corpora ]]; then
    corpora=../shared/data
    [[ -d .distill/corpora ]] && corpora=.distill/corpora
fi
python=${PYTHON:-python}
[[ -x .venv/bin/python && -z ${PYTHON:-} ]] && python=.venv/bin/python
command -v "$python" >/dev/null || python=python3

# the mix the shipped models learned from: Tatoeba once, Multi30k twice; each file checked, one line per missing one
names=(tatoeba multi30k) repeats=(1 2) tests=(test test_2016_flickr)
missing=0
for i in "${!names[@]}"; do
    for split in train val "${tests[$i]}"; do
        for language in en de; do
            file=$corpora/${names[$i]}/$split.$language
            [[ -s $file ]] || { echo "error: missing $file (the corpus mix needs it)" >&2; missing=1; }
        done
    done
done
((missing == 0)) || exit 2

# a wheel the machine lacks travels in .distill/wheels (scripts/pack_distill.sh); installed without the network.
# One interpreter start checks both (importing torch takes seconds): 3 is a missing module, 4 no CUDA device.
modules=(sentencepiece safetensors sacrebleu tqdm)
probe="import sys
try:
    import torch, $(IFS=,; echo "${modules[*]}")
except ImportError:
    sys.exit(3)
sys.exit(4 if '$device' == 'cuda' and not torch.cuda.is_available() else 0)"
found=0
"$python" -c "$probe" 2>/dev/null || found=$?
if ((found == 3)); then
    [[ -d .distill/wheels ]] || { echo "error: $python lacks one of torch ${modules[*]} and no .distill/wheels" \
        "holds them (bash scripts/pack_distill.sh gathers them)" >&2; exit 2; }
    step "installing ${modules[*]} from .distill/wheels"
    "$python" -m pip install --quiet --no-index --find-links .distill/wheels "${modules[@]}"
    found=0
    "$python" -c "$probe" 2>/dev/null || found=$?
fi
if ((found == 4)); then
    echo "error: no CUDA device torch can use on this machine: run on a GPU machine, or add --device cpu" \
        "for a test run" >&2
    exit 2
elif ((found != 0)); then
    echo "error: $python could not import torch ${modules[*]} (exit $found)" >&2
    exit 2
fi

started=$SECONDS
export PYTHONUNBUFFERED=1
mkdir -p "$work" "$out"
if [[ ! -f $work/mix/mix.json ]]; then
    step "the corpus mix: ${names[*]} repeated ${repeats[*]} times"
    folders=()
    for name in "${names[@]}"; do folders+=("$(cd "$corpora/$name" && pwd)"); done
    "$python" -m transformer.data mix --out "$work/mix" "${folders[@]}" --repeat "${repeats[@]}"
fi

# the 50M shape of the issue's pilot (val BLEU rising 1.5-5 points per epoch after 10 epochs), on the shipped tokenizer
teacher_flags=${TEACHER_FLAGS:-"--tokenizer checkpoints/en-de/spm.model --d-model 512 --n-heads 8 --n-layers 6 \
--d-ff 2048 --max-tokens 24000 --lr 8e-4 --warmup 600 --dropout 0.1 --epochs 300 --average 2"}
pairs=(en-de de-en)
labelled() {  # labelled LABEL COMMAND...: runs COMMAND with its output lines prefixed, its progress bar to a log
    local label=$1
    shift
    "$@" 2>"$work/$label.log" | sed -u "s/^/[$label] /"
}
run_side_by_side() {  # run_side_by_side KIND: each pair's "$KIND_command" in the background, then waits for both
    local kind=$1 pids=() status=0
    for pair in "${pairs[@]}"; do
        "${kind}_command" "$pair"
        labelled "$kind-$pair" "${command[@]}" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
    if ((status != 0)); then
        echo "error: a $kind run failed (exit $status); its log is in $work" >&2
        tail -n 5 "$work/$kind"-*.log >&2
        exit "$status"
    fi
}

teacher_command() {
    local pair=$1 folder=$work/teacher-$1
    if [[ -f $folder/metrics.json ]]; then
        command=(echo "$folder: trained already")
    elif [[ -d $folder/resume ]]; then
        command=("$python" -m transformer.train --resume "$folder" --max-minutes "$train_minutes" --device "$device")
    else
        # shellcheck disable=SC2206  # the flags are words on purpose
        command=("$python" -m transformer.train --data-dir "$work/mix" --src "${pair%-*}" --tgt "${pair#*-}"
                 --out "$folder" $teacher_flags --max-minutes "$train_minutes" --device "$device")
    fi
}
step "training both teachers side by side, $train_minutes min each on $device"
heartbeat "teachers" run_side_by_side teacher
for pair in "${pairs[@]}"; do
    [[ -f $work/teacher-$pair/metrics.json ]] || { echo "error: teacher $pair wrote no model (see $work)" >&2; exit 3; }
done

translate_command() {
    local pair=$1 left
    # the whole run's budget, less what has gone and half a minute for the last chunk and the summary
    left=$(awk -v total="$total_minutes" -v gone=$((SECONDS - started)) 'BEGIN { m = total - gone / 60 - 0.5;
        printf "%.2f", (m > 0.05 ? m : 0.05) }')
    local batch=256
    [[ $device == cpu ]] && batch=32
    # shellcheck disable=SC2206  # the flags are words on purpose
    command=("$python" -m transformer.distill translate --teacher "$work/teacher-$pair" --mix "$work/mix"
             --out "$out/$pair" --device "$device" --beam-size 4 --batch-size "$batch" --max-minutes "$left"
             ${TRANSLATE_FLAGS:-})
}
step "translating every training source with its teacher (beam 4)"
heartbeat "translation" run_side_by_side translate

step "what to copy back from $out ($(( (SECONDS - started) / 60 )) min $(( (SECONDS - started) % 60 )) s)"
"$python" - "$out" "${pairs[@]}" <<'EOF'
import json, sys
from pathlib import Path
out, limit = Path(sys.argv[1]), 16 * 2**20
files = sorted(p for p in out.rglob("*") if p.is_file())
for path in files:
    size = path.stat().st_size
    print(f"  {path.relative_to(out)}  {size / 2**20:.2f} MiB{'  (over 16 MiB!)' if size > limit else ''}")
for pair in sys.argv[2:]:
    record = json.loads((out / pair / "teacher.json").read_text())
    scores = ", ".join(f"{name} {s['bleu']}" for name, s in record["teacher"]["scores"].items())
    done = record["translation"]
    lines = ", ".join(f"{n} {c['translated']:,}/{c['source_lines']:,}" for n, c in done["corpora"].items())
    print(f"  {pair} teacher: BLEU {scores}; translated {lines} in {done['seconds'] / 60:.1f} min")
if len(files) > 8 or any(p.stat().st_size > limit for p in files):
    sys.exit(f"error: {len(files)} files in {out}; at most 8 of at most 16 MiB each may be copied back")
EOF
