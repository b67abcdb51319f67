"""Decoding strategies. Importing a strategy's file registers it (see registry.py); the order of this
line is the order of the settings in the API."""
from . import greedy, beam, sampling  # noqa: F401, I001 (registration order: greedy first in the UI)
from .registry import (STRATEGIES, SettingError, SettingSpec, Strategy, all_settings, build_settings, get_strategy,
                       register, setting, unregister)

__all__ = ["STRATEGIES", "SettingError", "SettingSpec", "Strategy", "all_settings", "build_settings", "get_strategy",
           "register", "setting", "unregister"]
