"""The explorer's views, one file each; the shell makes one tab per entry, in this order."""
from .atlas import AtlasView
from .attention import AttentionView
from .attribution import AttributionView
from .base import LATEST, MODEL, TRANSLATION, View, ViewContext, current_translation
from .cause import CauseView
from .export import ExportView
from .features import FeaturesView
from .glossary import GlossaryView
from .heads import HeadsView
from .learn import LearnView
from .lens import LensView
from .live import LiveView
from .model import ModelView
from .positional import PositionalView
from .query_key import QueryKeyView
from .steps import StepsView
from .tokens import TokensView
from .training import TrainingView
from .tree import TreeView
from .walkthrough import WalkEntryView, WalkthroughView

# the walk-through and the glossary come last: the first screen's buttons open them, and the tabs before them keep
# their places in the tab row
VIEWS: list[View] = [WalkEntryView(), LiveView(), StepsView(), AttentionView(), TreeView(), LensView(), HeadsView(),
                     AttributionView(), CauseView(), FeaturesView(), QueryKeyView(), AtlasView(), TokensView(),
                     PositionalView(), ModelView(), TrainingView(), LearnView(), ExportView(), WalkthroughView(),
                     GlossaryView()]

__all__ = ["LATEST", "MODEL", "TRANSLATION", "VIEWS", "View", "ViewContext", "current_translation"]
