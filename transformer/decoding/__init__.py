"""Decoding and the trace: strategies (a registry), the step-by-step decoder, and the Translation each
sentence ends up as."""
from .strategies import STRATEGIES, SettingError, Strategy, register, setting
from .trace import Attention, Recorded, SearchTree, Step, Translation
from .translator import Translator

__all__ = ["STRATEGIES", "Attention", "Recorded", "SearchTree", "SettingError", "Step", "Strategy", "Translation",
           "Translator", "register", "setting"]
