"""The model: configuration, attention, layers, positions, the Transformer, what it can record (and patch), and
head masking."""
from .capture import AttentionRecord, NotReached, Recording, capture_attention, record
from .config import ModelConfig
from .head_mask import heads_masked
from .model import Transformer
from .params import expected_parameter_count
from .patching import Replace, patch
from .probes import ATTENTION_KINDS, PROBES, Probe

__all__ = ["ATTENTION_KINDS", "PROBES", "AttentionRecord", "ModelConfig", "NotReached", "Probe", "Recording",
           "Replace", "Transformer", "capture_attention", "expected_parameter_count", "heads_masked", "patch", "record"]
