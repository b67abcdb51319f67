"""What the API's endpoints answer, as JSON: a translation with its summary, its compact trace (the live view's
payload), every number behind the plots, and an explanation of one choice (why this piece and not another)."""
from __future__ import annotations

import json

from transformer.analysis.registry import ANALYSES
from transformer.core.head_ref import shown
from transformer.decoding.export import to_json

from .heads_off import format_heads_off
from .live_payload import live_payload
from .session import RunResult
from .text import literal


def summary(result: RunResult) -> str:
    described = ", ".join(f"{name.replace('_', ' ')} {literal(str(value))}" for name, value in result.settings.items()
                          if name not in ("max_length", "prefix", "heads_off"))
    if result.settings.get("heads_off"):
        described += f"{', ' if described else ''}heads off: {literal(format_heads_off(result.settings['heads_off']))}"
    if result.settings.get("prefix"):
        described += f"{', ' if described else ''}forced start “{literal(str(result.settings['prefix']))}”"
    again = " (for an equal request moments ago; this is that answer)" if result.from_cache else ""
    lines = [f"**{len(result.translations)} sentence(s)** translated in **{result.milliseconds:.0f} ms**{again} on "
             f"{result.device.upper()} with {result.strategy_label}{f' ({described})' if described else ''}, "
             "attention captured."]
    lines += [f"⚠️ {literal(n)}" for n in result.notices]
    return "\n\n".join(lines)


def details_json(result: RunResult) -> dict:
    """Translate and return every number behind the plots: tokens, ids, steps with top-k candidates, the search
    tree, and attention weights [layer][head][query][key] for encoder_self, decoder_self and cross."""
    details = json.loads(to_json(result.translations))
    for sentence, translation in zip(details["sentences"], result.translations):
        extra = analyses_json(translation)
        if extra:
            sentence["analyses"] = extra
    return {
        "model": result.model_key,
        "device": result.device,
        "strategy": result.strategy,
        "settings": result.settings,
        "milliseconds": round(result.milliseconds, 1),
        "notices": result.notices,
        **details,
    }


def analyses_json(translation) -> dict:
    """Each registered analysis's result that declares a JSON form, by name, with its label (the built-in ones keep
    their own fields: "contributions", the attention's "norms")."""
    return {name: {"label": ANALYSES[name].label, **ANALYSES[name].to_json(translation, result)}
            for name, result in translation.analyses.items() if name in ANALYSES and ANALYSES[name].to_json}


def translation_json(result: RunResult) -> dict:
    """Translate each line; returns the translation (and each line's), the summary the page shows, the strategy
    and settings used, the query string of a link that opens this request in the page, and `other_language`: null,
    or where the text looks like another served model's source language, that language, its probability and the
    model that translates from it (the text is still translated with the model asked for)."""
    return {"translation": "\n".join(t.text for t in result.translations),
            "translations": [t.text for t in result.translations], "summary": summary(result),
            "model": result.model_key, "device": result.device, "strategy": result.strategy,
            "settings": result.settings, "milliseconds": round(result.milliseconds, 1), "notices": result.notices,
            "other_language": None if result.offer is None else result.offer.to_json(),
            "link": "?" + result.request.to_link()}


def trace_json(result: RunResult) -> dict:
    """Translate each line; returns the translation and, per line, the compact trace the page's live view draws:
    every attention kind, layer and head as bytes (1/255 steps, zlib-deflated, base64) with its labels, the
    norms behind norm-based attention and ALTI+ contributions. /translate_details has the same at full precision."""
    return translation_json(result) | {"traces": [live_payload(t) for t in result.translations]}


def contrast_json(translation, contrast, foil: str) -> dict:
    """A Contrast (analysis/contrastive.py) with its tokens, numbered from 1 as the page numbers steps."""
    return {
        "step": shown(contrast.step),
        "chosen": translation.tgt_tokens[contrast.step],
        "foil": foil,
        "log_odds": round(contrast.log_odds, 6),
        "method": "contrastive input x gradient of log p(chosen) - log p(foil) (Yin and Neubig, 2022)",
        "source": [{"token": t, "score": round(float(v), 6)} for t, v in zip(translation.src_tokens, contrast.source)],
        "prefix": [
            {"token": t, "score": round(float(v), 6)} for t, v in zip(translation.decoder_input_tokens, contrast.prefix)
        ],
        "alti_logit": None if contrast.layers is None else layers_json(translation, contrast.layers),
    }


def layers_json(translation, layers) -> dict:
    """The log-odds read through the layers (analysis/alti_logit.py): each input's share; with `biases` they sum to
    the log-odds exactly."""
    return {
        "method": "ALTI-Logit (Ferrando et al., 2023): each input's share of log p(chosen) - log p(foil), "
        "through the layers; the shares and the biases sum to the log-odds",
        "source": [{"token": t, "score": round(float(v), 6)} for t, v in zip(translation.src_tokens, layers.source)],
        "prefix": [
            {"token": t, "score": round(float(v), 6)} for t, v in zip(translation.decoder_input_tokens, layers.prefix)
        ],
        "biases": round(layers.biases, 6),
    }
