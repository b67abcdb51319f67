"""The analyses the explorer runs, one registration line each (see registry.py); cheap ones run in this order, so
one may read a result registered before it (the norms reuse ALTI+'s pass)."""
from ..decoding.logit_lens import LogitLens
from . import alti, attribution, causal, contrastive, norms, query_key, walkthrough
from .registry import LOGIT_LENS, Analysis, register

LENS = register(Analysis("logit lens", "Logit lens", LogitLens, None, records=(LOGIT_LENS,),
                         description="what each decoder layer would predict at each step, made while decoding")).name
ALTI_PLUS = register(alti.ANALYSIS).name
NORMS = register(norms.ANALYSIS).name
ATTRIBUTION = register(attribution.ANALYSIS).name
CONTRAST = register(contrastive.ANALYSIS).name
QUERY_KEY = register(query_key.ANALYSIS).name
WALKTHROUGH = register(walkthrough.ANALYSIS).name
PATCHING = register(causal.ANALYSIS).name
