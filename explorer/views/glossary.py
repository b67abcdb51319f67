"""Glossary: every term the page uses in one or two plain sentences, as one list (the text lives in
explorer/glossary.py, which also gives the info marks where the terms appear)."""
from __future__ import annotations

import gradio as gr

from ..glossary import GLOSSARY
from ..text import literal
from .base import View


def glossary_markdown() -> str:
    return "\n".join(f"- **{literal(term)}**: {literal(text)}" for term, text in
                     sorted(GLOSSARY.items(), key=lambda item: item[0].strip("<>/▁").lower() or item[0]))


class GlossaryView(View):
    name, title = "glossary", "Glossary"

    def build(self, context):
        return {"glossary_list": gr.Markdown(glossary_markdown(), elem_id="glossary-list")}

    def render(self, result, state, context, changed):
        return {}
