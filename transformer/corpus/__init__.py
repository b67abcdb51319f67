"""Corpora and scoring, below both training/ and analysis/: parallel corpora read and checked (data.py), several
mixed into one training folder (mix.py), and a model scored on a corpus (scoring.py: batched translation,
sacreBLEU, teacher-forced loss). Imports only the model side (core, decoding, tokenizer)."""
