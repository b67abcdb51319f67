"""Learn: a tiny Transformer trained on a toy task while the class watches its attention form
(transformer/playground/). Pick a task, a model and a seed and press Train: the curve and the probe's attention
(every layer and head, the three kinds) are redrawn as it trains, in a worker process of its own
(explorer/training_queue.py). Each task's default run was trained at build time and opens at once, with no
training on the server. A finished run replays step by step on the scrubber, opens in every other tab, and is
shared by a link (?learn=<run id>).

The tab's components are drawn in the browser only when it is first opened (Gradio's tabs render their children
then), and nothing here runs before that: the first screen pays nothing for it."""
from __future__ import annotations

import functools
from pathlib import Path

import gradio as gr

from transformer.playground import TASKS, Replay, Settings, SettingsError
from transformer.playground.replay import REPLAY_FILE
from transformer.playground.settings import LIMITS
from transformer.playground.shipped import shipped_folder

from .. import figures
from ..text import literal, page_error
from ..training_queue import TrainingQueue, slots_from_environment
from .base import LATEST, View
from .selection import MEAN, head_choices, layer_choices

SETTING_NAMES = ("task", "layers", "heads", "width", "pos_encoding", "norm", "seed", "steps")
APP_TIME_CAP = 60.0  # seconds a run may train on the shared server
REPRODUCIBLE = ("Reproducible: the same task, model and seed give the same curve on the same CPU (one thread; this "
                "server's is {cpu}).")


@functools.lru_cache(maxsize=32)
def cached_replay(path: str, modified: float) -> Replay:
    return Replay.load(path)


def open_replay(folder: Path) -> Replay:
    path = folder / REPLAY_FILE
    return cached_replay(str(path), path.stat().st_mtime)


def checked_settings(values) -> Settings:
    named = dict(zip(SETTING_NAMES, values))
    try:
        return Settings.checked(**named, time_cap=APP_TIME_CAP)
    except SettingsError as error:
        raise page_error(str(error)) from None


def spoken(pieces: list[str], task: str) -> str:
    return literal(TASKS[task].joiner.join(pieces)) or "(nothing yet)"


def snapshot_values(replay_like: dict, index: int, task: str, title: str) -> dict:
    """The curve with `index`'s step marked, the attention at that snapshot and its prediction, by name.
    `replay_like`: {"loss_steps", "losses", "snapshots", "source", "target", "labels"}, the snapshot at `index` with
    its attention unpacked."""
    snapshots = replay_like["snapshots"]
    snapshot = snapshots[index]
    steps, accuracies = [s["step"] for s in snapshots], [s["accuracy"] for s in snapshots]
    source, target = replay_like["source"], replay_like["target"]
    return {
        "learn_curve": figures.learning_curve(replay_like["loss_steps"], replay_like["losses"], steps, accuracies,
                                              title, snapshot["step"]),
        "learn_attention": figures.attention_tiles(snapshot["attention"], replay_like["labels"],
                                                   f"Step {snapshot['step']}: the probe's attention"),
        "learn_prediction": (f"**What it predicts now** for {literal(TASKS[task].source_text(source))}: "
                             f"**{spoken(snapshot['prediction'], task)}** (wanted: {spoken(target, task)}; "
                             f"exact match on held-out examples {snapshot['accuracy']:.0%})"),
    }


def replay_values(replay: Replay, index: int | None = None) -> dict:
    index = len(replay.snapshots) - 1 if index is None else min(max(int(index), 0), len(replay.snapshots) - 1)
    snapshot = replay.at(index)
    snapshots = [*replay.snapshots[:index], snapshot, *replay.snapshots[index + 1:]]
    like = {"loss_steps": list(range(1, len(replay.losses) + 1)), "losses": replay.losses, "snapshots": snapshots,
            "source": replay.source, "target": replay.target,
            "labels": {kind: replay.labels(kind) for kind in snapshot["attention"]}}
    settings = Settings.checked(**replay.settings)
    return snapshot_values(like, index, settings.task, f"{TASKS[settings.task].title}: {settings.describe()}")


class LearnView(View):
    name, title = "learn", "Learn"

    def build(self, context):
        defaults = Settings.checked(task="reverse", **TASKS["reverse"].model, steps=TASKS["reverse"].steps)
        named = {}
        with gr.Row(elem_id="learn-settings"):
            named["learn_task"] = gr.Dropdown([(t.title, t.name) for t in TASKS.values()], value=defaults.task,
                                              label="Task", elem_id="learn-task", min_width=160)
            for name, label in (("layers", "Layers"), ("heads", "Heads"), ("width", "Width"), ("seed", "Seed"),
                                ("steps", "Steps")):
                kind, low, high = LIMITS[name]
                named[f"learn_{name}"] = gr.Number(getattr(defaults, name), label=label, precision=0, minimum=low,
                                                   maximum=high, elem_id=f"learn-{name}", min_width=80)
            named["learn_pos_encoding"] = gr.Radio(["sinusoidal", "learned"], value=defaults.pos_encoding,
                                                   label="Positions", elem_id="learn-pos-encoding")
            named["learn_norm"] = gr.Radio(["pre", "post"], value=defaults.norm, label="Norm", elem_id="learn-norm")
        named["learn_pattern"] = gr.Markdown(pattern_text("reverse"), elem_id="learn-pattern")
        with gr.Row():
            named["learn_train"] = gr.Button("Train", variant="primary", elem_id="learn-train")
            named["learn_stop"] = gr.Button("Stop", elem_id="learn-stop")
            named["learn_default"] = gr.Button("Watch the default run (no training)", elem_id="learn-default")
        named["learn_status"] = gr.Markdown(elem_id="learn-status")
        named["learn_prediction"] = gr.Markdown(elem_id="learn-prediction")
        named["learn_curve"] = gr.Plot(label="Loss and exact match", elem_id="learn-curve")
        named["learn_scrub"] = gr.Slider(0, 1, value=0, step=1, label="Replay: snapshot", elem_id="learn-scrub",
                                         info="how each head formed, snapshot by snapshot")
        named["learn_attention"] = gr.Plot(label="The probe's attention: every layer and head",
                                           elem_id="learn-attention")
        with gr.Row(elem_id="learn-after"):
            named["learn_open"] = gr.Button("Open this model in every tab", elem_id="learn-open")
            named["learn_link"] = gr.Textbox(label="Share this run", interactive=False, elem_id="learn-link",
                                             max_lines=1, placeholder="a finished run's link appears here")
        named["learn_run"] = gr.State(None)  # {"folder": the run's folder, "run_id": its id or None (shipped)}
        # the token of the visitor's latest Train, set in the browser by TOKEN_JS and sent by Stop (STOP_JS)
        named["learn_token"] = gr.Textbox(visible=False, elem_id="learn-token")
        return named

    def render(self, result, state, context, changed):
        return {}  # nothing here depends on a translation

    def wire(self, ui) -> None:
        c = ui.components
        settings = [c[f"learn_{name}"] for name in SETTING_NAMES]
        shown = [c[name] for name in SHOWN]
        drawn = [c["learn_prediction"], c["learn_curve"], c["learn_attention"]]
        private = {"api_visibility": "private"}
        ui.tabs[self.name].select(functools.partial(opened, ui), [c["learn_task"], c["learn_run"]], shown, **private)
        c["learn_task"].change(chosen_task, c["learn_task"], [c["learn_pattern"], c["learn_layers"], c["learn_heads"],
                                                              c["learn_width"], c["learn_steps"]], **private)
        # the default run with its own settings in the controls, so that Train then trains that run again
        c["learn_default"].click(watch_default_with_settings, c["learn_task"], shown + settings[1:], **private)
        # Stop asks the server to stop the run by its token, rather than cancelling the Train event in the browser:
        # Gradio's cancel can leave the event's outputs in their error state when it meets the run's last message
        c["learn_train"].click(functools.partial(train, ui), [*settings, c["learn_token"]], shown, js=TOKEN_JS,
                               concurrency_limit=8, **private)
        c["learn_stop"].click(functools.partial(stop, ui), c["learn_token"], None, js=STOP_JS, queue=False,
                              **private)
        c["learn_scrub"].input(scrub, [c["learn_scrub"], c["learn_run"]], drawn, **private, **LATEST)
        c["learn_open"].click(functools.partial(open_everywhere, ui), c["learn_run"],
                              [c["model"], c["source"], c["tabs"], ui.open_tab, c["layer"], c["head"]],
                              **private).then(
            None, None, None, js="() => document.querySelector('#translate-button')?.click()")

        def opened_by_link(http: gr.Request):  # Gradio finds the request by this annotation, which a partial hides
            return from_link(ui, http)

        ui.demo.load(opened_by_link, None, [c["tabs"], *shown], **private).then(
            # the tab's children are drawn once it is selected: scroll when they are there
            None, None, None, js="() => new URLSearchParams(location.search).get('learn') && setTimeout(() => "
                                 "document.querySelector('#learn-status')?.scrollIntoView(), 500)")


# a new token for each Train (not crypto.randomUUID: a class's server on plain HTTP is not a secure context)
TOKEN_JS = """(...values) => { window.learnRun = Date.now().toString(16) + Math.random().toString(16).slice(2);
  return [...values.slice(0, %d), window.learnRun]; }""" % len(SETTING_NAMES)
STOP_JS = "() => [window.learnRun || '']"
TOKEN_LENGTH = 64  # at most, in characters: a longer one is no token of ours and stops nothing
SHOWN = ("learn_status", "learn_prediction", "learn_curve", "learn_attention", "learn_scrub", "learn_link", "learn_run")


def run_queue(ui) -> TrainingQueue:
    if ui.training is None:
        ui.training = TrainingQueue(slots_from_environment())
    return ui.training


def opened(ui, task, run=None):
    """The tab opened: a worker started for the first Train, and the task's default run shown at once, unless a run
    is shown already (a shared link's, or one trained before the visitor left the tab)."""
    run_queue(ui).warm()
    if run:
        return (gr.update(),) * len(SHOWN)
    return watch_default(task)


def watch_default(task):
    return show_folder(shipped_folder(task), None, "The default run, trained when this app was built.")


def watch_default_with_settings(task) -> tuple:
    """The task's default run (SHOWN's values), then its settings for the setting controls after the task
    (SETTING_NAMES[1:]), as the run was trained with them."""
    folder = shipped_folder(task)
    settings = open_replay(folder).settings
    return (*watch_default(task), *(settings[name] for name in SETTING_NAMES[1:]))


def show_folder(folder: Path, run_id: str | None, note: str) -> tuple:
    """A finished run's replay at its last snapshot, the scrubber over its snapshots, its link: SHOWN's values."""
    replay = open_replay(folder)
    values = replay_values(replay)
    status = f"{note} {REPRODUCIBLE.format(cpu=literal(replay.machine['cpu']))}"
    last = len(replay.snapshots) - 1
    return (status, values["learn_prediction"], values["learn_curve"], values["learn_attention"],
            gr.update(maximum=max(1, last), value=last), f"?learn={run_id}" if run_id else "",
            {"folder": str(folder), "run_id": run_id})


def run_token(token) -> str | None:
    return token if isinstance(token, str) and 0 < len(token) <= TOKEN_LENGTH else None


def stop(ui, token=None) -> None:
    """Stop pressed: the run of the visitor's latest Train ends (train() says so), whether it trains or waits."""
    if run_token(token) is not None:
        run_queue(ui).stop(token)


def train(ui, *values):
    """Train pressed: the run's place while it waits, a redraw per snapshot while it trains, its replay at the end.
    `values`: SETTING_NAMES' values, then the run's token (Stop names the run by it)."""
    checked = checked_settings(values[:len(SETTING_NAMES)])
    token = run_token(values[len(SETTING_NAMES)]) if len(values) > len(SETTING_NAMES) else None
    task = TASKS[checked.task]
    source, target = task.probe
    snapshots, labels, keep = [], replay_labels(source, target), [gr.update()] * 3
    queue = run_queue(ui)
    at_once = "one run trains" if queue.slots == 1 else f"{queue.slots} runs train"
    for kind, value in queue.train(checked.to_dict(), token=token):
        if kind == "stopped":
            yield (f"Stopped at step {snapshots[-1]['step']}: the run's process ended." if snapshots
                   else "Stopped before its first step."), *[gr.update()] * 6
        elif kind == "waiting":
            yield f"Waiting: number {value} in the queue ({at_once} at a time on this server).", *[gr.update()] * 6
        elif kind == "snapshot":
            snapshots.append({"step": value.step, "loss": value.loss, "accuracy": value.accuracy,
                              "prediction": value.prediction, "attention": value.attention})
            # live, the loss is each snapshot's mean since the one before; the replay has every update's
            like = {"loss_steps": [s["step"] for s in snapshots[1:]], "losses": [s["loss"] for s in snapshots[1:]],
                    "snapshots": snapshots, "source": source, "target": target, "labels": labels}
            drawn = snapshot_values(like, len(snapshots) - 1, checked.task, f"{task.title}: {checked.describe()}")
            yield (f"Training: step {value.step} of {checked.steps}, {value.seconds:.1f} s.", drawn["learn_prediction"],
                   drawn["learn_curve"], drawn["learn_attention"], *keep)
        elif kind == "done":
            run_id, folder, stopped_by = value
            note = (f"Stopped by the time cap of {APP_TIME_CAP:.0f} s." if stopped_by
                    else "Trained.") + " Scrub the replay below, or share it by its link."
            yield show_folder(folder, run_id, note)
        else:
            raise page_error(value)


def scrub(index, run):
    if not run:
        return gr.update(), gr.update(), gr.update()
    values = replay_values(open_replay(Path(run["folder"])), index)
    return values["learn_prediction"], values["learn_curve"], values["learn_attention"]


def open_everywhere(ui, run):
    """The run's model served from now on and chosen, its probe typed as the source; the page then translates."""
    if not run:
        raise page_error("Train a run or watch a default run first.")
    replay = open_replay(Path(run["folder"]))
    settings = Settings.checked(**replay.settings)
    key = f"learn-{run['run_id'] or settings.task}"
    ui.registry.add(key, Path(run["folder"]), f"Playground: {TASKS[settings.task].title}, {settings.describe()}")
    text = TASKS[settings.task].source_text(replay.source)
    # the shared layer and head pickers fitted to this model now, before its first translation: an event sent
    # meanwhile must not carry the last model's layer 4 to a model of 2
    layers, heads = settings.layers, settings.heads
    return (gr.update(choices=ui.registry.choices, value=key), text, gr.Tabs(selected="attention"), "attention",
            gr.update(choices=layer_choices(layers), value=str(layers - 1)),
            gr.update(choices=head_choices(heads), value=MEAN))


def from_link(ui, http: gr.Request):
    """?learn=<run id>: the Learn tab opened on that run's replay."""
    run_id = dict(http.query_params).get("learn") if http else None
    if not run_id:
        return [gr.update()] * (len(SHOWN) + 1)
    folder = run_queue(ui).run_folder(run_id)
    if folder is None:
        raise page_error(f"learn: no kept run has the id {run_id!r} (the server keeps the latest 50 runs while it "
                         "runs)")
    return (gr.Tabs(selected="learn"), *show_folder(folder, run_id, "A shared run, replayed."))


def chosen_task(task: str) -> tuple:
    chosen = TASKS[task]
    return (pattern_text(task), chosen.model["layers"], chosen.model["heads"], chosen.model["width"], chosen.steps)


def pattern_text(task: str) -> str:
    chosen = TASKS[task]
    return f"**What a trained model's cross-attention shows:** {chosen.pattern}. *Why:* {chosen.why}."


def replay_labels(source: list[str], target: list[str]) -> dict:
    """The maps' labels, as a Replay gives them."""
    replay = Replay({}, "", list(source), list(target), [], [], None, 0, {})
    return {kind: replay.labels(kind) for kind in ("encoder_self", "decoder_self", "cross")}

