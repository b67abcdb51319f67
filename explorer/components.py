"""Input components whose validation errors name the setting and its allowed values.

Gradio checks ranges and choices before a handler runs, with messages such as "Value 0 is less than
minimum value 1." that do not say which input was wrong; API callers need to know.
"""
from __future__ import annotations

import gradio as gr


def _range_error(component, payload):
    return gr.Error(f"{component.label} must be in [{component.minimum}, {component.maximum}], got {payload!r}")


class Slider(gr.Slider):
    def preprocess(self, payload):
        if payload is None:  # not given (an API call that leaves it out): the request decides
            return None
        if not isinstance(payload, (int, float)) or isinstance(payload, bool):
            raise _range_error(self, payload)
        try:
            return super().preprocess(payload)
        except gr.Error as error:
            raise _range_error(self, payload) from error


class Number(gr.Number):
    def preprocess(self, payload):
        if payload is None:  # not given (an API call that leaves it out): the request decides
            return None
        try:
            return super().preprocess(payload)
        except (gr.Error, TypeError, ValueError) as error:
            raise gr.Error(f"{self.label} must be a whole number in [{self.minimum}, {self.maximum}], got {payload!r}") from error


def _choices_error(component, payload):
    allowed = ", ".join(repr(value) for _, value in component.choices)
    return gr.Error(f"{component.label} must be one of {allowed}; got {payload!r}")


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
