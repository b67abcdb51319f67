"""The playground's toy tasks: each a generator of (source pieces, target pieces) over its own tiny vocabulary, and
the attention pattern a model that solved it should show: for each target piece, the source piece its
cross-attention should weigh most (`expected_keys`; None where the task fixes none).

Shapes of attention here: rows are target pieces (the decoder's query that predicts that piece), columns the source
pieces followed by </s>.
"""
from __future__ import annotations

import calendar
import random
from dataclasses import dataclass, field
from typing import Callable

from ..choices import checked_choice

DIGITS = [str(d) for d in range(10)]
ONES_EN = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS_EN = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
            "nineteen"]
TENS_EN = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
ONES_DE = ["eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]
TEENS_DE = ["zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn", "achtzehn",
            "neunzehn"]
TENS_DE = ["zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig", "neunzig"]
MONTHS = list(calendar.month_name)[1:]
YEARS = (1950, 2049)  # the date task's years, inclusive


@dataclass(frozen=True)
class Task:
    name: str
    title: str
    pattern: str  # the attention a correct model shows, in words
    why: str  # why that pattern solves the task
    symbols: tuple[str, ...]  # the vocabulary, besides the four specials
    joiner: str  # how the target's pieces join into text
    source_joiner: str
    sample: Callable[[random.Random], tuple[list[str], list[str]]]
    expected_keys: Callable[[list[str], list[str]], list[int | None]]
    # the evaluation set: None draws fresh examples; a function lists it (a small closed task's held-out part)
    every_example: Callable[[], list[tuple[list[str], list[str]]]] | None = None
    model: dict = field(default_factory=dict)  # the default model (layers, heads, width, ...)
    steps: int = 400  # the default run's updates
    probe: tuple[list[str], list[str]] | None = None  # the example whose attention is drawn
    # the source as a person writes it ("March 3, 2021"); None joins the pieces with `source_joiner`
    write_source: Callable[[list[str]], str] | None = None

    def source_text(self, pieces: list[str]) -> str:
        return self.write_source(pieces) if self.write_source else self.source_joiner.join(pieces)


def digits(rng: random.Random, longest: int = 8) -> list[str]:
    return [rng.choice(DIGITS) for _ in range(rng.randint(1, longest))]


def copy_task(rng):
    source = digits(rng)
    return source, list(source)


def reverse_task(rng):
    source = digits(rng)
    return source, source[::-1]


def sort_task(rng):
    source = digits(rng)
    return source, sorted(source)


def sorted_keys(source, target):
    """Each target digit comes from the next smallest source digit: the first unused source position of that digit
    (a stable sort)."""
    order = sorted(range(len(source)), key=lambda i: source[i])
    return order[: len(target)]


def english_words(number: int) -> list[str]:
    """1 -> ["one"], 13 -> ["thirteen"], 21 -> ["twenty", "-", "one"]."""
    if number < 10:
        return [ONES_EN[number - 1]]
    if number < 20:
        return [TEENS_EN[number - 10]]
    tens, ones = divmod(number, 10)
    return [TENS_EN[tens - 2]] + (["-", ONES_EN[ones - 1]] if ones else [])


def german_words(number: int) -> list[str]:
    """1 -> ["eins"], 13 -> ["dreizehn"], 21 -> ["ein", "und", "zwanzig"]: German says the ones first."""
    if number < 10:
        return [ONES_DE[number - 1]]
    if number < 20:
        return [TEENS_DE[number - 10]]
    tens, ones = divmod(number, 10)
    if not ones:
        return [TENS_DE[tens - 2]]
    return ["ein" if ones == 1 else ONES_DE[ones - 1], "und", TENS_DE[tens - 2]]


# the numbers task's held-out numbers, never trained on: two compound numbers per tens word (twenty to ninety),
# each of whose words the training numbers use elsewhere ("twenty" in 21, "three" in 33), so a model that writes them
# has learned the rule (ones first, then "und", then the tens), not the list
HELD_OUT_NUMBERS = (23, 28, 34, 37, 41, 46, 52, 59, 63, 65, 74, 78, 81, 87, 92, 96)
TRAINING_NUMBERS = tuple(n for n in range(1, 100) if n not in HELD_OUT_NUMBERS)


def number_task(rng):
    number = rng.choice(TRAINING_NUMBERS)
    return english_words(number), german_words(number)


def number_keys(source, target):
    """The ones word ← "one".."nine" (the source's last piece), "und" ← "-", the tens word ← "twenty".."ninety" (the
    source's first); a one-word number ← its one English word."""
    if len(target) == 1:
        return [0]
    return [2, 1, 0]


def held_out_numbers():
    return [(english_words(n), german_words(n)) for n in HELD_OUT_NUMBERS]


def date_task(rng):
    year, month = rng.randint(*YEARS), rng.randint(1, 12)
    day = rng.randint(1, calendar.monthrange(year, month)[1])
    source = [MONTHS[month - 1], *str(day), ",", *str(year)]
    target = [*str(year), "-", *f"{month:02d}", "-", *f"{day:02d}"]
    return source, target


def written_date(source: list[str]) -> str:
    """["March", "3", ",", "2", "0", "2", "1"] -> "March 3, 2021"."""
    return f"{source[0]} {''.join(source[1:-5])}, {''.join(source[-4:])}"


def date_keys(source, target):
    """Year digits ← the same year digits, month digits ← the month's name, day digits ← the day's digits (a leading
    zero the source lacks ← the day's one digit); the dashes ← none."""
    day = len(source) - 6  # month name, day digits, ",", four year digits
    year = [day + 2 + i for i in range(4)]
    days = [1, 1] if day == 1 else [1, 2]
    return [*year, None, 0, 0, None, *days]


TASKS: dict[str, Task] = {task.name: task for task in (
    Task("copy", "Copy", "a diagonal: the i-th output piece attends to the i-th source piece",
         "copying needs only each output's own position, so the head reads the same place in the source",
         tuple(DIGITS), " ", " ", copy_task, lambda s, t: list(range(len(t))),
         model={"layers": 1, "heads": 2, "width": 32}, steps=300,
         probe=(list("31415926"), list("31415926"))),
    Task("reverse", "Reverse", "an anti-diagonal: the i-th output piece attends to the i-th piece from the end",
         "the output's position counted from the start must meet the source's counted from the end, so the head "
         "has to know the length of the source",
         tuple(DIGITS), " ", " ", reverse_task, lambda s, t: [len(s) - 1 - i for i in range(len(t))],
         model={"layers": 2, "heads": 2, "width": 32}, steps=800,
         probe=(list("31415926"), list("62951413"))),
    Task("sort", "Sort", "jumps: each output piece attends to the next smallest source piece, wherever it stands",
         "sorting is content, not position: the head looks for the smallest digit not yet written",
         tuple(DIGITS), " ", " ", sort_task, sorted_keys,
         model={"layers": 2, "heads": 2, "width": 32}, steps=600,
         probe=(list("31415926"), sorted("31415926"))),
    Task("numbers", "English number words to German",
         "a cross-over: in \"twenty-one\" → \"einundzwanzig\" the first German piece attends to the last English "
         "word and the last German piece to the first",
         "German says the ones before the tens (ein-und-zwanzig), so the order of the two words flips",
         tuple(ONES_EN + TEENS_EN + TENS_EN + ["-"] + ONES_DE + ["ein", "und"] + TEENS_DE + TENS_DE), "", "",
         number_task, number_keys, every_example=held_out_numbers,
         model={"layers": 2, "heads": 2, "width": 32}, steps=300,
         probe=(english_words(47), german_words(47))),
    Task("dates", "Date format", "a reordering: year digits attend to the year at the end of the source, month "
         "digits to the month's name at its start, day digits to the day in the middle",
         "\"March 3, 2021\" → \"2021-03-03\" writes the last field first, so each output field reads its own place",
         tuple(MONTHS + DIGITS + [",", "-"]), "", " ", date_task, date_keys, write_source=written_date,
         model={"layers": 2, "heads": 2, "width": 32}, steps=600,
         probe=(["March", "3", ",", "2", "0", "2", "1"], list("2021-03-03"))),
)}


def get_task(name) -> Task:
    checked_choice("task", name, TASKS, unknown=f"unknown task {name!r}; the tasks are {sorted(TASKS)}")
    return TASKS[name]
