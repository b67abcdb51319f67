"""Every view on every Hugging Face family: a page serving one tiny converted model of each family (hub_fixtures.py),
and every event the page registers run through Gradio's server path before and after a translation, as
test_event_outputs.py runs them on the shipped models. An event answers for its own outputs or with a message to the
visitor; any other exception on the server, in any tab, fails."""
import asyncio

import pytest

pytest.importorskip("transformers")

from explorer.registry import discover  # noqa: E402
from explorer.views import learn, steps  # noqa: E402

from .hub_fixtures import VIEWED, Pair  # noqa: E402
from .test_event_outputs import failures, translated  # noqa: E402

pytestmark = pytest.mark.slow  # a page per family, every event of it
MAX_LENGTH = 6


@pytest.fixture(scope="module", params=VIEWED)
def page(request, tmp_path_factory):
    from explorer.shell import build_demo  # noqa: PLC0415

    root = tmp_path_factory.mktemp("served")
    Pair(request.param, root)  # converts into root / name beside the Hugging Face folder root / name-hf
    demo, ui = build_demo(discover(root))
    assert list(ui.registry.models) == [request.param]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(steps, "PLAY_DELAY_S", 0)
        patch.setattr(learn, "APP_TIME_CAP", 0.1)
        yield demo, ui, {component._id: name for name, component in ui.components.items()}


def learns(fn) -> bool:
    """An event of the Learn tab, which trains a model of its own whatever the page serves (test_event_outputs.py
    runs its events)."""
    return getattr(getattr(fn.fn, "func", fn.fn), "__module__", "") == learn.__name__


def test_every_event_answers_on_every_family(page):
    """After a translation (opening the page runs its load events, each checked); the sweep before one meets the
    "Translate first" guards, which test_event_outputs.py covers on the shipped models, whatever the model. A random
    model rarely ends its sentence: MAX_LENGTH steps give every step view several steps, and no view needs more
    (Play alone drew 64 steps three times, 6 s a family)."""
    found = failures(page, asyncio.run(translated(page, max_length=MAX_LENGTH)), skip=learns)
    assert not found, "\n".join(found)
