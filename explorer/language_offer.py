"""The page's offer of another model when the text looks like another language (language.py): a button under the
translation that names the model; one click chooses it, with its recorded decoding, and translates again."""
from __future__ import annotations

import gradio as gr

from transformer.decoding.strategies import all_settings

from . import controls

TRANSLATE_AGAIN_JS = "() => document.querySelector('#translate-button').click()"


def offer_button() -> gr.Button:
    return gr.Button(visible=False, size="sm", variant="secondary", elem_id="language-offer")


def offer_update(result) -> dict:
    """The button after a translation: shown with the offered model's name, or hidden."""
    offer = result.offer
    if offer is None:
        return gr.update(visible=False)
    return gr.update(visible=True, value=f"Translate it as {offer.language_name}: {offer.model_label}")


def wire_language_offer(ui) -> None:
    c = ui.components
    specs = all_settings()

    def take_offer(result):
        if result is None or result.offer is None:  # a stale button: nothing to take
            return {c["model"]: gr.update()}
        model_key = result.offer.model
        strategy, recorded = ui.registry.get(model_key).translator.recorded_decoding()
        values = controls.decoding_values(strategy, recorded)
        return ({c["model"]: model_key, c["strategy"]: strategy, c["language_offer"]: gr.update(visible=False)}
                | {c[name]: value for name, value in values.items()})

    c["language_offer"].click(take_offer, ui.result_state,
                              [c["model"], c["strategy"], c["language_offer"]] + [c[spec.key] for spec in specs],
                              api_visibility="private", queue=False).then(None, None, None, js=TRANSLATE_AGAIN_JS)
