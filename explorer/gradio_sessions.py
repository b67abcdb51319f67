"""A visitor's session without a copy of every component's configuration at its first request.

Gradio builds a `SessionState` the first time it sees a session (each page load, each API client). Its `__init__`
computes `config_values`, the configuration of every block (210 on this page, `Block.get_config` each): about 15 ms
of the server's Python, under the interpreter lock, per visitor. A class of 32 arriving at once spent ~0.5 s of
the server's event loop on it (py-spy, bench/load_test.py --plan distinct), just when their first translations
were waiting. Its one reader is `SessionState.components`, for Gradio's deep links, which this app does not use.

`lazy_session_configs` leaves `config_values` empty at creation and has `components` fill what is missing when it
is read, in the same order, so a deep link still gets every block's configuration. Gradio's other writers
(`__setitem__`, `_update_config`, `_update_value_in_config`) already fill single entries. The patch applies only
to the `SessionState.__init__` it was written against (its source's digest); any other Gradio is left as it is.

    lazy_session_configs()   # once, after importing gradio
"""
from __future__ import annotations

import hashlib
import inspect
import os
from copy import copy

from gradio import state_holder

# what the app's log and footer say where the patch does not apply
NOT_PATCHED = ("Gradio's session patch did not apply (this Gradio's SessionState is not 6.31.0's, explorer/"
               "gradio_sessions.py): each visitor's first request copies every component's configuration.")
# sha256 of gradio 6.31.0's SessionState.__init__ source, the one `_init` below reproduces without the copy
KNOWN_INIT = "1b2ea21dc42c45da"


def _init(self, blocks) -> None:
    self.blocks_config = copy(blocks.default_config)
    self._config_blocks = blocks  # the ids Gradio's __init__ configured: those of `blocks`, filled when read
    self.config_values = {}
    self.state_data = {}
    self._state_ttl = {}
    self.is_closed = False
    self.STATE_TTL_WHEN_CLOSED = 1 if os.getenv("GRADIO_IS_E2E_TEST", None) else 3600


def _components(self):
    """Gradio's `components`: every block's configuration, those of `blocks` first in their order, as `__init__`
    made them, then any added since; missing ones are made now."""
    blocks = getattr(self, "_config_blocks", None)  # None: a session made before the patch, all made already
    configured = [] if blocks is None else [key for key in self.blocks_config.blocks if key in blocks.blocks]
    for key in configured:
        if key not in self.config_values:
            self.config_values[key] = self.blocks_config.config_for_block(key, [], self.blocks_config.blocks[key])
    first = set(configured)
    for key in configured + [key for key in self.config_values if key not in first]:
        config = self.config_values.get(key)
        if config:
            yield config


def lazy_session_configs() -> bool:
    """Patches SessionState (see the module docstring); whether it is patched."""
    cls = state_holder.SessionState
    if cls.__init__ is _init:
        return True
    try:
        digest = hashlib.sha256(inspect.getsource(cls.__init__).encode()).hexdigest()[:16]
    except (OSError, TypeError):
        return False
    if digest != KNOWN_INIT:
        return False
    cls.__init__ = _init
    cls.components = property(_components)
    return True
