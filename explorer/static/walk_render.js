// The walk-through's drawing: a sticky bar (Back, the stage list, Next, the walk's own Layer and Head pickers, pin),
// an overview with the encoder stack beside the decoder stack (inside a decoder layer: masked self-attention, then
// cross-attention fed by the encoder's output, then feed-forward), and the stage, every number labelled. Drawn from
// the one payload: moving between stages, layers and heads, and the output's sliders, never ask the server. Runs as
// the js_on_load of a gr.HTML component, after walk_data.js: `element`, `props` and `watch` come from Gradio (or from
// the standalone file). Text comes from the payload and is set with textContent, never as markup.
const walk = {payload: null, source: null, stage: 1, open: null, layer: 0, head: 0, pinned: null, predict: false,
              unpacking: null, unpacked: null,  // the sent payload being inflated; the last inflated, with its source
              overview: false,  // on a phone the overview folds away behind a button, so the stage is on the first screen
              revealed: new Set(), sliders: {temperature: 1, topK: 0, topP: 1}};

function wkNode(tag, attributes = {}, text = null) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, v);
  if (text !== null) el.textContent = text;
  return el;
}

// a stage's title at the shown layer and head, for the list and the outline (each stage once per walk, layer and head)
const wkTitles = new Map();
function titleOf(number) {
  const key = `${number}:${walk.layer}:${walk.head}`;
  if (!wkTitles.has(key)) wkTitles.set(key, stageAt(walk.payload, number, walk.layer, walk.head).title);
  return wkTitles.get(key);
}

function goTo(number) {
  walk.stage = move(number, 0, walk.payload.stages.length);
  walk.open = blockOf(walk.payload, walk.stage);
  drawWalk();
}

function infoMark(term, box) {
  const text = walk.payload.glossary[term];
  const mark = wkNode("button", {type: "button", class: "wk-term", title: text || term, "data-term": term}, term + " ");
  mark.appendChild(wkNode("span", {class: "wk-i", "aria-hidden": "true"}, "i"));
  mark.addEventListener("click", () => { box.textContent = `${term}: ${text || ""}`; box.hidden = false; });
  return mark;
}

function blockBox(block) {
  const p = walk.payload, current = block.key === blockOf(p, walk.stage), opened = walk.open === block.key;
  const box = wkNode("div", {class: "wk-block" + (current ? " wk-current" : "") + (opened ? " wk-open" : ""),
                             role: "listitem", "data-block": block.key});
  const head = wkNode("button", {type: "button", class: "wk-block-title", "aria-expanded": String(opened)}, block.title);
  head.addEventListener("click", () => {
    walk.open = opened ? null : block.key;
    if (!opened && !current) walk.stage = block.stages[0];
    drawWalk();
  });
  box.append(head, wkNode("span", {class: "wk-block-note"}, block.note), wkNode("span", {class: "wk-block-data"}, block.data));
  if (block.groups.length) {  // the operations inside a layer, in the model's order
    const groups = wkNode("div", {class: "wk-groups"});
    for (const group of block.groups) {
      const on = group.stages.includes(walk.stage);
      const g = wkNode("button", {type: "button", class: `wk-group wk-group-${group.key}` + (on ? " wk-on" : ""),
                                  "data-group": group.key}, group.title);
      g.addEventListener("click", () => goTo(group.stages[0]));
      groups.appendChild(g);
    }
    box.appendChild(groups);
  }
  return box;
}

function overview(root) {
  const p = walk.payload, flow = wkNode("div", {class: "wk-flow", role: "list"});
  for (const column of ["encoder", "decoder"]) {
    const stack = wkNode("div", {class: `wk-stack wk-stack-${column}`, "data-column": column});
    stack.appendChild(wkNode("div", {class: "wk-stack-title"}, column === "encoder" ? "Encoder stack" : "Decoder stack"));
    p.blocks.filter(b => b.column === column).forEach((block, i) => {
      if (i) stack.appendChild(wkNode("span", {class: "wk-arrow", "aria-hidden": "true"}, "↓"));
      stack.appendChild(blockBox(block));
    });
    flow.appendChild(stack);
    if (column === "encoder") flow.appendChild(wkNode("span", {class: "wk-arrow wk-memory", title: "the encoder's output feeds every decoder layer's cross-attention"}, "memory →"));
  }
  root.appendChild(flow);
  const block = p.blocks.find(b => b.key === walk.open);
  if (block) {  // the outline: the open block's operations in the model's order (of a layer: the current operation's)
    const group = block.groups.find(g => g.stages.includes(walk.stage));
    const ops = wkNode("div", {class: "wk-ops", "data-block": block.key});
    ops.appendChild(wkNode("span", {class: "wk-ops-title"}, `${block.title}` + (group ? `, ${group.title}:` : ":")));
    for (const number of group ? group.stages : block.stages) {
      const b = wkNode("button", {type: "button", class: "wk-op" + (number === walk.stage ? " wk-on" : ""),
                                  "data-stage": number}, titleOf(number));
      b.addEventListener("click", () => goTo(number));
      ops.appendChild(b);
    }
    root.appendChild(ops);
  }
}

function picker(label, name, count, value, change) {
  const wrap = wkNode("label", {class: "wk-picker"}, `${label} `);
  const select = wkNode("select", {class: `wk-${name}`, "aria-label": `${label} (the walk's ${name})`,
                                   title: walk.payload.glossary["layer picker"] || ""});
  for (let i = 0; i < count; i++) {
    const o = wkNode("option", {value: String(shown(i))}, String(shown(i)));  // numbered as people read
    if (i === value) o.selected = true;
    select.appendChild(o);
  }
  select.addEventListener("change", () => { change(fromShown(Number(select.value))); drawWalk(); });
  wrap.appendChild(select);
  return wrap;
}

function navigation(root) {
  const p = walk.payload, total = p.stages.length, bar = wkNode("div", {class: "wk-nav"});
  const back = wkNode("button", {type: "button", class: "wk-back"}, "← Back");
  back.disabled = walk.stage === 1;
  back.addEventListener("click", () => goTo(move(walk.stage, -1, total)));
  const next = wkNode("button", {type: "button", class: "wk-next"}, "Next →");
  next.disabled = walk.stage === total;
  next.addEventListener("click", () => goTo(move(walk.stage, 1, total)));
  const list = wkNode("select", {class: "wk-list", "aria-label": "Stages"});
  for (const block of p.blocks) {
    const group = wkNode("optgroup", {label: block.title});
    for (const number of block.stages) {
      const o = wkNode("option", {value: String(number)}, `${number}. ${titleOf(number)}`);
      if (number === walk.stage) o.selected = true;
      group.appendChild(o);
    }
    list.appendChild(group);
  }
  list.addEventListener("change", () => goTo(Number(list.value)));
  const pin = wkNode("button", {type: "button", class: "wk-pin", "aria-pressed": String(!!walk.pinned)},
                     walk.pinned ? `Unpin layer ${shown(walk.pinned.layer)} head ${shown(walk.pinned.head)}` : "Pin this head");
  pin.title = p.glossary.pin || "";
  pin.addEventListener("click", () => { walk.pinned = walk.pinned ? null : {layer: walk.layer, head: walk.head}; drawWalk(); });
  const predict = wkNode("button", {type: "button", class: "wk-predict", "aria-pressed": String(walk.predict),
                                    title: p.glossary["predict first"] || ""}, "Predict first");
  predict.addEventListener("click", () => { walk.predict = !walk.predict; walk.revealed.clear(); drawWalk(); });
  const fold = wkNode("button", {type: "button", class: "wk-fold", "aria-expanded": String(walk.overview)},
                      walk.overview ? "Hide the model" : "Show the model");
  fold.addEventListener("click", () => { walk.overview = !walk.overview; drawWalk(); });
  bar.append(back, next, fold, list, picker("Layer", "layer", p.layers, walk.layer, v => { walk.layer = v; }),
             picker("Head", "head", p.heads, walk.head, v => { walk.head = v; }), pin, predict,
             wkNode("span", {class: "wk-count"}, `${walk.stage} / ${total}`));
  root.appendChild(bar);
}

// The query an attention stage is about (0-based), for linked hover: the source piece or the step
function queryOf(stage) {
  const p = walk.payload;
  if (!/\.(encoder_self|decoder_self|cross)\./.test(stage.key)) return undefined;
  return stage.block === "encoder" ? fromShown(p.token) : fromShown(p.step);
}

function stagePanel(stage, label) {
  const panel = wkNode("section", {class: "wk-stage", "data-stage": String(stage.number), "data-key": stage.key,
                                   "aria-live": "polite"});
  const query = queryOf(stage);
  if (query !== undefined) panel.dataset.query = String(query);
  panel.appendChild(wkNode("h3", {class: "wk-title"}, `${stage.number}. ${stage.title}`));
  if (label) panel.appendChild(wkNode("div", {class: "wk-pinned-label"}, label));
  if (query !== undefined) {
    const pieces = stage.block === "encoder" ? walk.payload.src_tokens : walk.payload.decoder_inputs;
    panel.appendChild(wkNode("div", {class: "wk-query", "data-ax": "query", "data-at": String(query)},
                             `query: “${pieces[query]}” (position ${shown(query)})`));
  }
  panel.appendChild(wkNode("p", {class: "wk-text"}, stage.text));
  panel.appendChild(wkNode("p", {class: "wk-why"}, `Why this matters: ${stage.why}`));
  panel.appendChild(wkNode("div", {class: "wk-formula"}, stage.formula));
  const terms = wkNode("div", {class: "wk-terms"}), definitionBox = wkNode("div", {class: "wk-definition"});
  definitionBox.hidden = true;
  stage.terms.forEach(term => terms.appendChild(infoMark(term, definitionBox)));
  panel.append(terms, definitionBox);
  const asked = `${stage.number}:${walk.layer}:${walk.head}`, answer = answerOf(stage);
  if (walk.predict && stage.ask && answer && !walk.revealed.has(asked)) {  // the room guesses before the numbers
    const question = wkNode("div", {class: "wk-ask"}, stage.ask + " ");
    const reveal = wkNode("button", {type: "button", class: "wk-reveal"}, "Reveal");
    reveal.addEventListener("click", () => { walk.revealed.add(asked); drawWalk(); });
    question.appendChild(reveal);
    panel.append(question, wkNode("div", {class: "wk-module"}, `Computed in ${stage.module}`));
    return panel;
  }
  if (walk.predict && answer) {
    panel.appendChild(wkNode("div", {class: "wk-answer"},
      `The model: “${answer.piece}” first, at ${formatValue(answer.value)}.`));
  }
  const scale = vectorScale(stage);
  if (scale > 0 && stage.numbers.filter(n => n.kind === "vector").length > 1) panel.appendChild(colourKey(scale, false, true));
  stage.numbers.forEach(n => panel.appendChild(figure(n, panel, scale)));
  if (stage.key === "output.softmax") panel.appendChild(sliders(panel));
  panel.appendChild(wkNode("div", {class: "wk-module"}, `Computed in ${stage.module}`));
  return panel;
}

function stages(root) {
  const p = walk.payload, stage = stageAt(p, walk.stage, walk.layer, walk.head);
  const pin = walk.pinned;
  if (!pin || stage.per !== "head" || (pin.layer === walk.layer && pin.head === walk.head)) {
    root.appendChild(stagePanel(stage, pin ? "pinned head shown only on the attention stages of one head" : ""));
    return;
  }
  const pair = wkNode("div", {class: "wk-pair"});  // two heads side by side
  pair.append(stagePanel(stageAt(p, walk.stage, pin.layer, pin.head), `pinned: layer ${shown(pin.layer)}, head ${shown(pin.head)}`),
              stagePanel(stage, `compared: layer ${shown(walk.layer)}, head ${shown(walk.head)}`));
  root.appendChild(pair);
}

// Q·Kᵀ/√d_k → + mask → softmax in place: moving between two stages of one attention sub-layer, the first row of
// numbers starts from the colours the last stage showed and eases to its own (CSS transition; none with reduced
// motion). Drawing is done at once: the motion never holds Next back.
function rowColours(root) {
  const stage = root.querySelector(".wk-stage");
  const row = stage && stage.querySelector('.wk-numbers[data-kind="row"]:not([data-name="mask"])');
  return row ? {key: stage.dataset.key, colours: [...row.querySelectorAll(".wk-value")].map(c => c.style.background)} : null;
}

function easeFrom(root, before) {
  const after = rowColours(root);
  if (!before || !after || before.colours.length !== after.colours.length) return;
  const sub = key => key.split(".").slice(0, 2).join(".");
  if (sub(before.key) !== sub(after.key) || before.key === after.key) return;
  const cells = [...root.querySelector('.wk-stage .wk-numbers[data-kind="row"]:not([data-name="mask"])').querySelectorAll(".wk-value")];
  cells.forEach((cell, i) => { cell.classList.add("wk-ease"); cell.style.background = before.colours[i]; });
  requestAnimationFrame(() => requestAnimationFrame(() => cells.forEach((cell, i) => { cell.style.background = after.colours[i]; })));
}

function drawWalk() {
  const root = element.querySelector(".wk-walk");
  if (!root) return;
  const started = performance.now();
  const payload = props.value;
  if (!payload || !payload.document) {
    walk.payload = walk.source = walk.unpacking = null;
    root.replaceChildren(wkNode("div", {class: "wk-empty"},
      "Press “Walk through” above, or “How it computed this” beside the translation, to walk through every operation " +
      "on its numbers (translate a sentence first if none is showing)."));
    delete root.dataset.stage;
    return;
  }
  const opened = payload !== walk.source, first = !walk.source;
  if (opened && walk.unpacked?.from !== payload) {  // a new walk is inflated first; the old one stays until it is
    if (walk.unpacking !== payload) {
      walk.unpacking = payload;
      unpackPayload(payload).then(unpacked => {
        if (walk.unpacking === payload) { walk.unpacked = {from: payload, unpacked}; drawWalk(); }
      });
    }
    return;
  }
  const focused = root.contains(document.activeElement);
  if (opened) {  // a new walk: the same stage, layer and head as before (a new piece or step), else the first stage
    const key = walk.payload ? walk.payload.stages[walk.stage - 1].key : null;
    walk.source = payload;
    walk.payload = decodePayload(walk.unpacked.unpacked);
    wkTitles.clear();
    walk.stage = key ? stageForKey(walk.payload, key) : 1;
    walk.layer = Math.min(walk.layer, fromShown(payload.layers));
    walk.head = Math.min(walk.head, fromShown(payload.heads));
    walk.open = blockOf(walk.payload, walk.stage);
  }
  const before = opened ? null : rowColours(root);
  root.replaceChildren();
  const p = walk.payload;
  root.appendChild(wkNode("div", {class: "wk-head"},
    `“${p.token_piece}” (source piece ${p.token}) · step ${p.step}, predicting “${p.step_piece}” · ` +
    `layer ${shown(walk.layer)}, head ${shown(walk.head)}`));
  navigation(root);
  overview(root);
  stages(root);
  root.classList.toggle("wk-show-overview", walk.overview);
  easeFrom(root, before);
  root.dataset.stage = String(walk.stage);
  root.dataset.token = String(p.token);
  root.dataset.step = String(p.step);
  root.dataset.layer = String(shown(walk.layer));
  root.dataset.head = String(shown(walk.head));
  root.dataset.drawMs = (performance.now() - started).toFixed(1);  // what the benchmark reads: the drawing alone
  if (focused && !root.contains(document.activeElement)) root.focus({preventScroll: true});
  const box = root.getBoundingClientRect();
  const away = box.bottom < 0 || box.top > window.innerHeight;  // opened from the first screen: show it
  if (opened && (first || away) && root.scrollIntoView) root.scrollIntoView({block: "start"});
}

// the arrow keys move through the stages only while the focus is in the walk (not in one of its lists or sliders);
// PageDown, PageUp and the arrows elsewhere stay the page's
element.addEventListener("keydown", event => {
  const root = element.querySelector(".wk-walk");
  if (!walk.payload || !root || !root.contains(event.target)) return;
  const tag = event.target.tagName;
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || event.target.isContentEditable) return;
  const delta = keyAction(event.key);
  if (!delta) return;
  event.preventDefault();
  goTo(move(walk.stage, delta, walk.payload.stages.length));
});

drawWalk();
watch("value", drawWalk);
