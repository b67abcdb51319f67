#!/usr/bin/env bash
# Gathers what scripts/distill_gpu.sh needs beside the project's code on a GPU machine without network, into
# .distill/ (ignored by git, carried as one path): the corpus mix's files, and wheels of the Python packages that
# training and translation import besides torch, for a machine that lacks them.
#
#   bash scripts/pack_distill.sh                # corpora from ../shared/data (CORPORA=... for another folder)
#   NO_WHEELS=1 bash scripts/pack_distill.sh    # the corpora only (the GPU machine has the packages)
#   WHEEL_PYTHON=3.12 bash scripts/pack_distill.sh   # wheels for that Python version (default: this one's)
#
# The device tool then carries it: run(command="bash scripts/distill_gpu.sh --out $OUT/distilled",
# carry=[".distill"]). About 18 MB of corpora and 10 MB of wheels: within its 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/steps.sh
corpora=${CORPORA:-../shared/data}
python=${PYTHON:-python}
[[ -x .venv/bin/python && -z ${PYTHON:-} ]] && python=.venv/bin/python

declare -A splits=([tatoeba]="train val test" [multi30k]="train val test_2016_flickr")
missing=0
for name in tatoeba multi30k; do
    for split in ${splits[$name]}; do
        for language in en de; do
            [[ -s $corpora/$name/$split.$language ]] || { echo "error: missing $corpora/$name/$split.$language" >&2
                                                           missing=1; }
        done
    done
done
((missing == 0)) || exit 2

step "copying the corpora into .distill/corpora"
for name in tatoeba multi30k; do
    mkdir -p ".distill/corpora/$name"
    for split in ${splits[$name]}; do
        cp "$corpora/$name/$split".{en,de} ".distill/corpora/$name/"
    done
    [[ -f $corpora/$name/README.md ]] && cp "$corpora/$name/README.md" ".distill/corpora/$name/"
done
if [[ -z ${NO_WHEELS:-} ]]; then
    step "downloading wheels into .distill/wheels (sentencepiece safetensors sacrebleu tqdm and what they need)"
    version=()
    [[ -n ${WHEEL_PYTHON:-} ]] && version=(--python-version "$WHEEL_PYTHON")
    mkdir -p .distill/wheels
    "$python" -m pip download --disable-pip-version-check --quiet --only-binary=:all: "${version[@]}" \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
        --dest .distill/wheels sentencepiece safetensors sacrebleu tqdm \
        || echo "warning: the wheels could not be downloaded; the GPU machine must have those packages" >&2
fi
du -sh .distill/* | sed 's/^/    /'
total=$(du -sm .distill | cut -f1)
if ((total > 60)); then
    echo "warning: .distill holds ${total} MB; the device tool carries at most 64 MiB: remove what is not corpora/" \
        "or wheels/ (a local run's work/ or distilled/, say)" >&2
fi
