#!/usr/bin/env bash
# Trains the shipped sparse dictionaries (docs/features.md): for en-de and de-en, the last and a middle encoder
# layer's output and the last decoder layer's output, each on the first 30,000 Tatoeba training pairs, measured on
# the next 10,000 and on val, written to checkpoints/<model>/features/<point>/. Two at a time, one thread each.
#
#     bash scripts/train_dictionaries.sh [CORPUS_DIR]      # default ../shared/data/tatoeba
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=${1:-../shared/data/tatoeba}
logs=$(mktemp -d)
train() {  # model point
  local out="checkpoints/$1/features/$2"
  rm -rf "$out"
  .venv/bin/python -m transformer.features train "$1" "$corpus" "$out" --point "$2" --n 4096 --k 64 \
    --sentences 30000 --held-out 10000 --epochs 3 --threads 1 >"$logs/$1-$2.json" 2>"$logs/$1-$2.log"
  echo "$1 $2: $(tr -d '\n' <"$logs/$1-$2.json")"
}
for model in en-de de-en; do
  train "$model" encoder_layers.3.output &
  train "$model" encoder_layers.1.output &
  wait
  train "$model" decoder_layers.3.output
done
echo "logs in $logs"
