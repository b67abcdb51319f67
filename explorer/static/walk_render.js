// The walk-through's drawing: an overview of the model in which the sentence's data flows from the pieces through the
// encoder and, by cross-attention, into the decoder to the next-piece probabilities; each block opens into its
// operations; every stage drawn from the one payload (no request between stages). Next/Back, the list of stages and
// the arrow keys move through them. Runs as the js_on_load of a gr.HTML component, after walk_data.js:
// `element`, `props` and `watch` come from Gradio (or from the standalone file). Text comes from the payload and
// is set with textContent, never as markup.
const WK_SVG = "http://www.w3.org/2000/svg";
const walk = {payload: null, source: null, stage: 1, open: null};

function wkNode(tag, attributes = {}, text = null, svg = false) {
  const el = svg ? document.createElementNS(WK_SVG, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, v);
  if (text !== null) el.textContent = text;
  return el;
}

function goTo(number) {
  walk.stage = move(number, 0, walk.payload.stages.length);
  walk.open = blockOf(walk.payload, walk.stage);
  drawWalk();
}

// A term with its info mark: hover shows the glossary text (title), a tap opens it under the stage text.
function infoMark(term, box) {
  const text = walk.payload.glossary[term];
  const mark = wkNode("button", {type: "button", class: "wk-term", title: text || term, "data-term": term}, term + " ");
  mark.appendChild(wkNode("span", {class: "wk-i", "aria-hidden": "true"}, "i"));
  mark.addEventListener("click", () => { box.textContent = `${term}: ${text || ""}`; box.hidden = false; });
  return mark;
}

function overview(root) {
  const p = walk.payload, flow = wkNode("div", {class: "wk-flow", role: "list"});
  p.blocks.forEach((block, i) => {
    if (i) flow.appendChild(wkNode("span", {class: "wk-arrow", "aria-hidden": "true"}, "→"));
    const current = block.key === blockOf(p, walk.stage), opened = walk.open === block.key;
    const box = wkNode("div", {class: "wk-block" + (current ? " wk-current" : "") + (opened ? " wk-open" : ""),
                               role: "listitem", "data-block": block.key});
    const head = wkNode("button", {type: "button", class: "wk-block-title", "aria-expanded": String(opened)}, block.title);
    head.addEventListener("click", () => {
      walk.open = opened ? null : block.key;
      if (!opened && !current) walk.stage = block.stages[0];
      drawWalk();
    });
    box.appendChild(head);
    box.appendChild(wkNode("span", {class: "wk-block-note"}, block.note));
    box.appendChild(wkNode("span", {class: "wk-block-data"}, block.data));
    flow.appendChild(box);
  });
  root.appendChild(flow);
  const block = p.blocks.find(b => b.key === walk.open);
  if (block) {  // the open block's operations, in the model's order, each a stage of the walk
    const ops = wkNode("div", {class: "wk-ops", "data-block": block.key});
    ops.appendChild(wkNode("span", {class: "wk-ops-title"}, `${block.title}:`));
    for (const number of block.stages) {
      const b = wkNode("button", {type: "button", class: "wk-op" + (number === walk.stage ? " wk-on" : ""),
                                  "data-stage": number}, p.stages[number - 1].title);
      b.addEventListener("click", () => goTo(number));
      ops.appendChild(b);
    }
    root.appendChild(ops);
  }
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
      const o = wkNode("option", {value: String(number)}, `${number}. ${p.stages[number - 1].title}`);
      if (number === walk.stage) o.selected = true;
      group.appendChild(o);
    }
    list.appendChild(group);
  }
  list.addEventListener("change", () => goTo(Number(list.value)));
  bar.append(back, list, next, wkNode("span", {class: "wk-count"}, `${walk.stage} / ${total}`));
  root.appendChild(bar);
}

function strip(values, note) {
  const scale = maxAbs(values), width = 100 / values.length;
  // one gradient with hard stops: a few hundred features in one element, drawn at once
  const stops = values.map((v, i) => `${diverging(v, scale)} ${(i * width).toFixed(3)}% ${((i + 1) * width).toFixed(3)}%`);
  const el = wkNode("div", {class: "wk-strip", role: "img", "aria-label": `${values.length} numbers` + (note ? `; ${note}` : ""),
                            style: `background: linear-gradient(to right, ${stops.join(", ")})`});
  el.addEventListener("mousemove", event => {
    const box = el.getBoundingClientRect(), i = Math.floor((event.clientX - box.left) / box.width * values.length);
    if (i >= 0 && i < values.length) el.title = `feature ${i + 1}: ${formatValue(values[i])}`;
  });
  return el;
}

function valueCell(tag, v, scale, name, index) {
  const cell = wkNode(tag, {class: "wk-value", "data-name": name, "data-index": String(index),
                            style: `background:${diverging(v, scale)}`}, formatValue(v));
  return cell;
}

function figure(numbers) {
  const box = wkNode("div", {class: "wk-numbers", "data-name": numbers.name, "data-kind": numbers.kind});
  box.appendChild(wkNode("div", {class: "wk-label"}, numbers.label));
  const v = numbers.values;
  if (numbers.kind === "scalar") {
    box.appendChild(valueCell("span", v, 0, numbers.name, 0));
  } else if (numbers.kind === "vector") {
    box.appendChild(strip(v, numbers.note));
    const first = wkNode("div", {class: "wk-first"});
    shownValues(v).forEach((text, i) => first.appendChild(valueCell("span", v[i], 0, numbers.name, i)));
    first.appendChild(wkNode("span", {class: "wk-more"}, `… ${v.length} numbers` + (numbers.note ? ` · ${numbers.note}` : "")));
    box.appendChild(first);
  } else if (numbers.kind === "row" || numbers.kind === "tokens") {
    const scale = numbers.kind === "row" ? maxAbs(v) : 0, scroll = wkNode("div", {class: "wk-scroll"});
    const table = wkNode("table", {class: "wk-table"});
    const head = wkNode("tr"), body = wkNode("tr");
    (numbers.cols || v.map((_, i) => String(i + 1))).forEach((c, i) => {
      head.appendChild(wkNode("th", {}, c));
      body.appendChild(valueCell("td", v[i], scale, numbers.name, i));
    });
    table.append(head, body);
    scroll.appendChild(table);
    box.appendChild(scroll);
  } else if (numbers.kind === "matrix") {
    box.appendChild(matrixFigure(numbers));
  }
  return box;
}

function matrixFigure(numbers) {
  const v = numbers.values, rows = v.length, cols = v[0].length, scroll = wkNode("div", {class: "wk-scroll"});
  const scale = maxAbs(v);
  if (rows * cols <= 64) {  // small: every number printed
    const table = wkNode("table", {class: "wk-table"});
    if (numbers.cols) {
      const head = wkNode("tr", {}, null);
      head.appendChild(wkNode("th"));
      numbers.cols.forEach(c => head.appendChild(wkNode("th", {}, c)));
      table.appendChild(head);
    }
    v.forEach((row, i) => {
      const tr = wkNode("tr");
      tr.appendChild(wkNode("th", {}, numbers.rows ? numbers.rows[i] : String(i + 1)));
      row.forEach((x, j) => tr.appendChild(valueCell("td", x, scale, numbers.name, i * cols + j)));
      table.appendChild(tr);
    });
    scroll.appendChild(table);
    return scroll;
  }
  // large (every position's key or value): colours on one canvas (a few thousand cells draw in a millisecond), the
  // number on hover
  const cell = Math.max(3, Math.min(10, Math.floor(300 / cols))), left = numbers.rows ? 80 : 4;
  const canvas = wkNode("canvas", {width: String(left + cols * cell), height: String(rows * cell + 2), class: "wk-heat",
                                   role: "img", "aria-label": numbers.label});
  const tip = wkNode("div", {class: "wk-tip"}, "hover a cell for its value");
  scroll.append(canvas, tip);
  const context = canvas.getContext && canvas.getContext("2d");
  if (context) {
    context.font = "10px sans-serif";
    context.textAlign = "end";
    context.fillStyle = getComputedStyle(element).color || "#1f2937";  // the page's text colour: dark mode reads
    if (numbers.rows) numbers.rows.forEach((label, i) => context.fillText(label, left - 4, i * cell + cell, left - 6));
    v.forEach((row, i) => row.forEach((x, j) => {
      context.fillStyle = diverging(x, scale);
      context.fillRect(left + j * cell, i * cell, cell, cell);
    }));
  }
  canvas.addEventListener("mousemove", event => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left - left) / cell), i = Math.floor((event.clientY - box.top) / cell);
    if (i >= 0 && i < rows && j >= 0 && j < cols) {
      tip.textContent = `${numbers.rows ? numbers.rows[i] : i + 1}, feature ${j + 1}: ${formatValue(v[i][j])}`;
    }
  });
  return scroll;
}

function stagePanel(root) {
  const p = walk.payload, stage = p.stages[walk.stage - 1];
  const panel = wkNode("section", {class: "wk-stage", "data-stage": String(stage.number), "data-key": stage.key,
                                   "aria-live": "polite"});
  panel.appendChild(wkNode("h3", {class: "wk-title"}, `${stage.number}. ${stage.title}`));
  panel.appendChild(wkNode("p", {class: "wk-text"}, stage.text));
  panel.appendChild(wkNode("div", {class: "wk-formula"}, stage.formula));
  const terms = wkNode("div", {class: "wk-terms"}), definitionBox = wkNode("div", {class: "wk-definition"});
  definitionBox.hidden = true;
  stage.terms.forEach(term => terms.appendChild(infoMark(term, definitionBox)));
  panel.append(terms, definitionBox);
  stage.numbers.forEach(n => panel.appendChild(figure(n)));
  panel.appendChild(wkNode("div", {class: "wk-module"}, `Computed in ${stage.module}`));
  root.appendChild(panel);
}

function drawWalk() {
  const root = element.querySelector(".wk-walk");
  if (!root) return;
  const started = performance.now();
  const payload = props.value;
  if (!payload || !payload.stages) {
    walk.payload = walk.source = null;
    root.replaceChildren(wkNode("div", {class: "wk-empty"},
      "Translate a sentence, then press “How it computed this” to walk through every operation on its numbers."));
    delete root.dataset.stage;
    return;
  }
  const opened = payload !== walk.source;
  if (opened) {  // a new walk opens at its first stage
    walk.source = payload;
    walk.payload = resolveRefs(payload);
    walk.stage = 1;
    walk.open = blockOf(walk.payload, 1);
  }
  const p = walk.payload;
  root.replaceChildren();
  root.appendChild(wkNode("div", {class: "wk-head"},
    `“${p.token_piece}” (source piece ${p.token}) · step ${p.step}, predicting “${p.step_piece}” · head ${p.head}`));
  overview(root);
  navigation(root);
  stagePanel(root);
  root.dataset.stage = String(walk.stage);
  root.dataset.drawMs = (performance.now() - started).toFixed(1);  // what the benchmark reads: the drawing alone
  if (opened && root.scrollIntoView) root.scrollIntoView({block: "start"});  // opened from the first screen: show it
}

// the arrow keys move through the stages while the walk is on screen and no text field or list has the keys
document.addEventListener("keydown", event => {
  const root = element.querySelector(".wk-walk");
  if (!walk.payload || !root || root.offsetParent === null) return;
  const target = event.target, tag = target && target.tagName;
  if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (target && target.isContentEditable)) return;
  const delta = keyAction(event.key);
  if (!delta) return;
  event.preventDefault();
  goTo(move(walk.stage, delta, walk.payload.stages.length));
});

drawWalk();
watch("value", drawWalk);
