"""Training and evaluation: corpora and batching, the training loop and its CLI, averaging, sacreBLEU
scoring, and model cards generated from metrics.json."""
