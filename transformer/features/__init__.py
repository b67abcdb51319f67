"""Sparse dictionary features: a TopK sparse autoencoder (Gao et al. 2024) trained on one recording point's vectors,
whose latents are directions the model uses at that point.

dictionary.py is the autoencoder and its config; training.py trains it (Adam, AuxK, unit-norm decoder rows, resumable
runs); metrics.py measures it (FVU, dead latents, L0); files.py saves and loads its folder; gather.py reads a point's
vectors over a list of sentences with a Translator.
"""
from .dictionary import DictionaryConfig, DictionaryError, Reconstruction, SparseDictionary
from .files import Origin, SavedDictionary, load_dictionary, save_dictionary
from .gather import Activations, gather_activations
from .metrics import DictionaryMetrics, measure
from .training import Progress, Trainer, TrainingSettings

__all__ = ["Activations", "DictionaryConfig", "DictionaryError", "DictionaryMetrics", "Origin", "Progress",
           "Reconstruction", "SavedDictionary", "SparseDictionary", "Trainer", "TrainingSettings", "gather_activations",
           "load_dictionary", "measure", "save_dictionary"]
