"""Text stays text and numbers are finite, before anything else reads them: the helpers every message is built with,
the one number rule, and the request and link constructors that apply it (no server; tests/test_hardening.py and
tests/test_browser_injection.py drive the same through a running app and a browser)."""
import ast
import html
import math
from html.parser import HTMLParser

import markdown
import pytest

from explorer.registry import discover
from explorer.request import MAX_OUTPUT_TOKENS, Request, RequestError
from explorer.share import parse_link
from explorer.text import literal, page_error
from transformer.decoding.strategies import all_settings
from transformer.numbers import NumberError, checked_number, parsed_number

from .conftest import ROOT

MARKUP = [
    '<form id="evil" action="https://evil.example/"><input type="password" name="p"></form>',
    "[Session expired, log in again](https://evil.example/login)",
    '<img src="https://evil.example/pixel.png"> ![x](https://evil.example/i.png)',
    '<svg onload="alert(1)"><a href="https://evil.example">x</a></svg>',
    "**bold** _it_ `code` ~~struck~~ </s> <s> &amp; &lt;",
    "<https://evil.example/auto> www.evil.example mail@evil.example",
    "# heading\n\n- item\n\n| a | b |\n|---|---|\n| 1 | 2 |",
]


class Elements(HTMLParser):
    """The tags and the visible text of an HTML fragment."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def rendered(fragment: str) -> Elements:
    parser = Elements()
    parser.feed(fragment)
    return parser


@pytest.mark.parametrize("value", MARKUP)
def test_literal_text_renders_as_itself_through_markdown(value):
    # Python-Markdown, an independent renderer: only the paragraph it wraps text in may appear, and the text read
    # back is the value (Markdown joins lines with a newline and drops leading spaces, which the page does too)
    page = rendered(markdown.markdown(literal(value)))
    assert set(page.tags) <= {"p"}, page.tags
    assert "".join(page.text).replace("\n", "") == value.replace("\n", "")
    assert html.unescape(literal(value)) == value


def test_literal_defeats_bare_links():
    for value in ("https://evil.example/x", "www.evil.example", "mail@evil.example"):
        escaped = literal(value)
        assert "://" not in escaped and "www." not in escaped.lower() and "@" not in escaped


@pytest.mark.parametrize("value", MARKUP)
def test_a_page_error_shows_its_message_as_text(value):
    message = page_error(f"prefix must be short, got {value!r}").message
    assert rendered(message).tags == [] and html.unescape(message) == f"prefix must be short, got {value!r}"


def test_no_module_raises_a_visitor_message_but_through_the_helpers():
    """gr.Error, gr.Warning and gr.Info render their message as HTML: every one is made in explorer/text.py."""
    callers = []
    for path in (ROOT / "explorer").rglob("*.py"):
        if path.name == "text.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("Error", "Warning", "Info") and getattr(node.func.value, "id", "") == "gr":
                callers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert callers == []


NOT_FINITE = [float("nan"), float("inf"), -float("inf")]


@pytest.mark.parametrize("value", NOT_FINITE + [True, "3", [1], None, {"a": 1}])
@pytest.mark.parametrize("kind", [int, float])
def test_the_number_rule_refuses_what_is_not_a_finite_number(value, kind):
    with pytest.raises(NumberError) as caught:
        checked_number("beam_size", value, kind, 1, 8)
    assert str(caught.value).startswith("beam_size must be") and "[1, 8]" in str(caught.value)
    assert str(caught.value).endswith(f"got {value!r}")


@pytest.mark.parametrize("text", ["NaN", "nan", "Infinity", "-Infinity", "inf", "1e999", "abc", "", "0x10", "2.5",
                                  "١", "٢.٥", "１２", "1_0", "²"])  # float() reads the first four as 1, 2.5, 12, 10
def test_text_numbers_are_refused_as_sent(text):
    with pytest.raises(NumberError) as caught:
        parsed_number("layer", text, int, 1, 3)
    assert str(caught.value) == f"layer must be an integer in [1, 3], got {text!r}"


@pytest.mark.parametrize("text, kind, expected", [("3", int, 3), (" 7 ", int, 7), ("2.0", int, 2), ("0.5", float, 0.5),
                                                  ("1e-1", float, 0.1), ("12345678901234567", int, 12345678901234567)])
def test_text_numbers_that_are_fine_pass(text, kind, expected):
    value = parsed_number("x", text, kind)
    assert value == expected and type(value) is kind


def test_out_of_range_says_the_range_and_the_value():
    with pytest.raises(NumberError, match=r"^max_length must be in \[1, 128\], got 129$"):
        checked_number("max_length", 129, int, 1, 128)
    with pytest.raises(NumberError, match=r"^--batch-size must be at least 1, got -3$"):
        parsed_number("--batch-size", "-3", int, 1)


@pytest.fixture(scope="module")
def registry():
    return discover(ROOT / "checkpoints")


BAD_NUMBERS = NOT_FINITE + [True, "4", [4], 2.5]


@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_max_length_through_the_api_is_a_finite_whole_number(registry, value):
    with pytest.raises(RequestError) as caught:
        Request.from_api(registry, "A dog runs.", max_length=value)
    assert caught.value.field == "max_length"
    assert f"[1, {MAX_OUTPUT_TOKENS}]" in str(caught.value) and str(caught.value).endswith(f"got {value!r}")


@pytest.mark.parametrize("spec", all_settings(), ids=lambda spec: spec.key)
@pytest.mark.parametrize("value", BAD_NUMBERS)
def test_every_strategy_setting_through_the_api_is_a_finite_number(registry, spec, value):
    if spec.kind is float and value == 2.5:
        value = spec.maximum + 1  # 2.5 is a fine float: out of range instead
    with pytest.raises(RequestError) as caught:
        Request.from_api(registry, "A dog runs.", strategy=spec.strategy, settings={spec.name: value})
    assert caught.value.field == spec.key
    assert f"[{spec.minimum}, {spec.maximum}]" in str(caught.value) and str(caught.value).endswith(f"got {value!r}")


LINK_NUMBERS = ["NaN", "Infinity", "-Infinity", "1e999", "abc", "2.5", "٢", "1_0"]


@pytest.mark.parametrize("text", LINK_NUMBERS)
@pytest.mark.parametrize("name, extra", [("max_length", {}), ("layer", {}), ("head", {}), ("step", {}),
                                         *[(spec.name, {"strategy": spec.strategy}) for spec in all_settings()]])
def test_every_number_in_a_link_is_checked_before_it_is_converted(registry, name, extra, text):
    specs = {spec.name: spec for spec in all_settings() if spec.strategy == extra.get("strategy")}
    if name in specs and specs[name].kind is float and text == "2.5":
        text = "7.5"  # a fine float: out of range instead
    with pytest.raises(RequestError) as caught:
        parse_link({"text": "A dog runs.", **extra, name: text}, registry)
    message = str(caught.value)
    assert caught.value.field == name and message.startswith(f"{name} in the link must be")
    assert message.endswith(f"got {text!r}") or message.endswith(f"got {float(text)!r}"), message
    assert "[" in message and "]" in message  # the range, numbered as the link numbers


def test_link_layers_and_heads_are_counted_from_1(registry):
    config = registry.get(registry.default_key).profile.config
    for name, high in (("layer", config.n_layers), ("head", config.n_heads)):
        for value in ("0", str(high + 1)):
            with pytest.raises(RequestError, match=rf"^{name} in the link must be in \[1, {high}\], got {value}$"):
                parse_link({"text": "A dog runs.", name: value}, registry)
    request, view = parse_link({"text": "A dog runs.", "layer": str(config.n_layers), "head": "1"}, registry)
    assert view["layer"] == config.n_layers - 1 and view["head"] == 0


@pytest.mark.parametrize(
    "arguments, field",
    [
        ({"prefix": 5}, "prefix"),
        ({"prefix": [5]}, "prefix"),
        ({"prefix": math.inf}, "prefix"),
        ({"heads_off": 5}, "heads_off"),
        ({"heads_off": [5]}, "heads_off"),
        ({"heads_off": [["cross", math.nan, 0]]}, "heads_off"),
        ({"heads_off": [["cross", 0.5, 0]]}, "heads_off"),
    ],
)
def test_wrong_types_are_named(registry, arguments, field):
    with pytest.raises(RequestError) as caught:
        Request.from_api(registry, "A dog runs.", **arguments)
    assert caught.value.field == field


def test_the_shipped_files_hold_no_markup_the_page_would_render():
    """The heads view's legend names </s> and <s>: written through `literal`, Markdown keeps them."""
    from explorer.views.heads import THRESHOLDS

    page = rendered(markdown.markdown(THRESHOLDS))
    assert "s" not in page.tags and "</s>" in "".join(page.text) and "<s>" in "".join(page.text)


def test_ranges_read_back_from_the_range_check(registry):
    """A link value at either end of its range passes: the rule refuses only what is outside."""
    for spec in all_settings():
        for value in (spec.minimum, spec.maximum):
            request, _ = parse_link({"text": "A dog runs.", "strategy": spec.strategy, spec.name: str(value)}, registry)
            assert request.settings[spec.name] == value
