"""Input components whose validation errors name the setting and its allowed values.

Gradio checks ranges and choices before a handler runs, with messages such as "Value 0 is less than
minimum value 1." that do not say which input was wrong; API callers need to know. Numbers go through the one
number rule (transformer/numbers.py): NaN and infinities pass Gradio's own range check (every comparison with
NaN is False), so they are refused here, before any handler converts them.
"""
from __future__ import annotations

import gradio as gr

from transformer.numbers import NumberError, checked_number

from .text import page_error


def _checked(component, payload, kind: type):
    try:
        return checked_number(component.label, payload, kind, component.minimum, component.maximum)
    except NumberError as error:
        raise page_error(str(error)) from None


class Slider(gr.Slider):
    def preprocess(self, payload):
        if payload is None:  # not given (an API call that leaves it out): the request decides
            return None
        _checked(self, payload, int if isinstance(self.step, int) and isinstance(self.minimum, int) else float)
        return super().preprocess(payload)


class Number(gr.Number):
    def preprocess(self, payload):
        if payload is None:  # not given (an API call that leaves it out): the request decides
            return None
        _checked(self, payload, int if self.precision == 0 else float)
        return super().preprocess(payload)


def _choices_error(component, payload):
    allowed = ", ".join(repr(value) for _, value in component.choices)
    return page_error(f"{component.label} must be one of {allowed}; got {payload!r}")


class _NamedChoices:
    """Mixed into a choice component: a value outside its choices gets a message naming both."""

    def preprocess(self, payload):
        try:
            return super().preprocess(payload)
        except gr.Error as error:
            raise _choices_error(self, payload) from error


class Dropdown(_NamedChoices, gr.Dropdown):
    pass


class Radio(_NamedChoices, gr.Radio):
    pass
