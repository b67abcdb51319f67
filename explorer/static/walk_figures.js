// The walk-through's figures (after walk_data.js, before walk_render.js): a stage's numbers drawn with row and column
// labels, a colour key with its scale, a legend for −∞, hover that names the cell ("query 4 · key 6") with the value
// as printed, and linked hover (a score lights its query and its key). Also the output stage's temperature, top-k
// and top-p sliders, recomputed here over the whole vocabulary from the step's logits.
const WK_ROW = 14;  // px per row of a heatmap: its row labels stay readable

// every element naming position `at` on axis `axis` ("query", "key") in the stage panel lights up with a hovered cell
function linkHover(el, panel, pairs) {
  const lit = () => pairs.flatMap(([axis, at]) => axis ? [...panel.querySelectorAll(`[data-ax="${axis}"][data-at="${at}"]`)] : []);
  el.addEventListener("mouseenter", () => lit().forEach(x => x.classList.add("wk-hl")));
  el.addEventListener("mouseleave", () => lit().forEach(x => x.classList.remove("wk-hl")));
}

function colourKey(scale, masked, shared) {
  const key = wkNode("div", {class: "wk-key"});
  key.append(wkNode("span", {}, formatValue(-scale)), wkNode("span", {class: "wk-key-bar", "aria-hidden": "true"}),
             wkNode("span", {}, formatValue(scale)));
  if (shared) key.appendChild(wkNode("span", {class: "wk-key-note"}, "one scale for every vector of this stage"));
  if (masked) {
    key.append(wkNode("span", {class: "wk-key-masked", "aria-hidden": "true"}),
               wkNode("span", {class: "wk-key-note"}, "grey: −∞, masked (weight exactly 0 after the softmax)"));
  }
  return key;
}

// a vector as one row of colours: a canvas one pixel per feature, stretched to the width (a thousand features paint
// in well under a millisecond), the feature and its value on hover
function strip(values, note, scale) {
  const el = wkNode("canvas", {class: "wk-strip", width: String(values.length), height: "1", role: "img",
                               "aria-label": `${values.length} numbers` + (note ? `; ${note}` : "")});
  const context = el.getContext && el.getContext("2d");
  if (context) values.forEach((v, i) => { context.fillStyle = diverging(v, scale); context.fillRect(i, 0, 1, 1); });
  el.addEventListener("mousemove", event => {
    const box = el.getBoundingClientRect(), i = Math.floor((event.clientX - box.left) / box.width * values.length);
    if (i >= 0 && i < values.length) el.title = `feature ${shown(i)}: ${formatValue(values[i])}`;
  });
  return el;
}

function valueCell(tag, v, scale, numbers, index, row, col, panel) {
  const name = cellName(numbers, row, col);
  const cell = wkNode(tag, {class: "wk-value", "data-name": numbers.name, "data-index": String(index),
                            "data-row": String(row), "data-col": String(col), style: `background:${diverging(v, scale, TEXT_OPACITY)}`,
                            title: name ? `${name}: ${formatValue(v)}` : formatValue(v)}, formatValue(v));
  const [rowAxis, colAxis] = numbers.axes || ["", ""];
  const query = panel.dataset.query;
  if (colAxis === "feature") {  // a vector's feature: the same feature of the stage's other vectors lights with it
    cell.dataset.ax = "feature";
    cell.dataset.at = String(col);
  }
  linkHover(cell, panel, [[rowAxis || (colAxis === "key" && query !== undefined ? "query" : ""), rowAxis ? row : query],
                          [colAxis, col]]);
  return cell;
}

function axisLabel(tag, text, axis, at) {
  return wkNode(tag, axis && axis !== "feature" ? {"data-ax": axis, "data-at": String(at), title: text} : {title: text}, text);
}

// a box that scrolls sideways on a narrow screen: a keyboard can focus and scroll it, and it is named by its numbers
function scrollBox(numbers) {
  return wkNode("div", {class: "wk-scroll", tabindex: "0", role: "region", "aria-label": numbers.label || numbers.name || "numbers"});
}

function rowFigure(numbers, panel) {
  const v = numbers.values, scale = numbers.kind === "row" ? maxAbs(v) : 0, scroll = scrollBox(numbers);
  const table = wkNode("table", {class: "wk-table"}), head = wkNode("tr"), body = wkNode("tr");
  const colAxis = (numbers.axes || ["", ""])[1];
  (numbers.cols || v.map((_, i) => String(shown(i)))).forEach((c, i) => {
    head.appendChild(axisLabel("th", c, colAxis, i));
    body.appendChild(valueCell("td", v[i], scale, numbers, i, 0, i, panel));
  });
  table.append(head, body);
  scroll.appendChild(table);
  return numbers.kind === "row" ? [scroll, colourKey(scale, hasMasked(v), false)] : [scroll];
}

function tableMatrix(numbers, panel, scale) {
  const v = numbers.values, cols = v[0].length, [rowAxis, colAxis] = numbers.axes || ["", ""];
  const table = wkNode("table", {class: "wk-table"});
  if (numbers.cols) {
    const head = wkNode("tr");
    head.appendChild(wkNode("th"));
    numbers.cols.forEach((c, j) => head.appendChild(axisLabel("th", c, colAxis, j)));
    table.appendChild(head);
  }
  v.forEach((row, i) => {
    const tr = wkNode("tr");
    tr.appendChild(axisLabel("th", numbers.rows ? numbers.rows[i] : String(shown(i)), rowAxis, i));
    row.forEach((x, j) => tr.appendChild(valueCell("td", x, scale, numbers, i * cols + j, i, j, panel)));
    table.appendChild(tr);
  });
  return table;
}

// a large matrix (every key's or value's features): colours on a canvas, row labels beside it, the value on hover
function heatMatrix(numbers, panel, scale) {
  const v = numbers.values, rows = v.length, cols = v[0].length, [rowAxis] = numbers.axes || ["", ""];
  const cell = Math.max(3, Math.min(10, Math.floor(320 / cols)));
  const grid = wkNode("div", {class: "wk-heatgrid"}), labels = wkNode("div", {class: "wk-rowlabels"});
  (numbers.rows || v.map((_, i) => String(shown(i)))).forEach((label, i) => {
    const l = axisLabel("div", label, rowAxis, i);
    l.style.height = l.style.lineHeight = `${WK_ROW}px`;
    labels.appendChild(l);
  });
  const canvas = wkNode("canvas", {width: String(cols * cell), height: String(rows * WK_ROW), class: "wk-heat",
                                   role: "img", "aria-label": numbers.label});
  const tip = wkNode("div", {class: "wk-tip"}, "hover a cell for its value");
  const context = canvas.getContext && canvas.getContext("2d");
  if (context) v.forEach((row, i) => row.forEach((x, j) => {
    context.fillStyle = diverging(x, scale);
    context.fillRect(j * cell, i * WK_ROW, cell, WK_ROW - 1);
  }));
  let lit = [];
  canvas.addEventListener("mousemove", event => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((event.clientX - box.left) / cell), i = Math.floor((event.clientY - box.top) / WK_ROW);
    lit.forEach(x => x.classList.remove("wk-hl"));
    lit = [];
    if (i >= 0 && i < rows && j >= 0 && j < cols) {
      tip.textContent = `${cellName(numbers, i, j)}: ${formatValue(v[i][j])}`;
      if (rowAxis) lit = [...panel.querySelectorAll(`[data-ax="${rowAxis}"][data-at="${i}"]`)];
      lit.forEach(x => x.classList.add("wk-hl"));
    }
  });
  const axis = wkNode("div", {class: "wk-colaxis"}, `${(numbers.axes || [])[1] || "column"}s 1–${cols} →`);
  const right = wkNode("div");
  right.append(canvas, axis);
  grid.append(labels, right);
  return [grid, tip];
}

function figure(numbers, panel, sharedScale) {
  const box = wkNode("div", {class: "wk-numbers", "data-name": numbers.name, "data-kind": numbers.kind});
  box.appendChild(wkNode("div", {class: "wk-label"}, numbers.label));
  const v = numbers.values;
  if (numbers.kind === "scalar") {
    box.appendChild(valueCell("span", v, 0, numbers, 0, 0, 0, panel));
  } else if (numbers.kind === "vector") {
    box.appendChild(strip(v, numbers.note, sharedScale));
    const first = wkNode("div", {class: "wk-first"});
    shownValues(v).forEach((_, i) => first.appendChild(valueCell("span", v[i], sharedScale, numbers, i, 0, i, panel)));
    first.appendChild(wkNode("span", {class: "wk-more"}, `… ${v.length} numbers` + (numbers.note ? ` · ${numbers.note}` : "")));
    box.appendChild(first);
  } else if (numbers.kind === "row" || numbers.kind === "tokens") {
    box.append(...rowFigure(numbers, panel));
  } else if (numbers.kind === "matrix") {
    const scale = maxAbs(v), scroll = scrollBox(numbers);
    if (v.length * v[0].length <= 64) scroll.appendChild(tableMatrix(numbers, panel, scale));
    else scroll.append(...heatMatrix(numbers, panel, scale));
    box.append(scroll, colourKey(scale, hasMasked(v), false));
  }
  return box;
}

// temperature, top-k and top-p over the step's whole vocabulary, recomputed on every move
function sliders(panel) {
  const p = walk.payload, s = walk.sliders, box = wkNode("div", {class: "wk-sliders", "data-name": "sliders"});
  const table = wkNode("div", {class: "wk-sampled"});
  const control = (name, label, min, max, step) => {
    const wrap = wkNode("label", {class: "wk-slider"}, `${label} `);
    const input = wkNode("input", {type: "range", min: String(min), max: String(max), step: String(step),
                                   value: String(s[name]), class: `wk-${name}`, "aria-label": label});
    const out = wkNode("output", {}, String(s[name]));
    input.addEventListener("input", () => { s[name] = Number(input.value); out.textContent = input.value; redraw(); });
    wrap.append(input, out);
    return wrap;
  };
  const redraw = () => {
    const started = performance.now(), result = sampling(logitsOf(p), s.temperature, s.topK, s.topP);
    const rows = wkNode("table", {class: "wk-table wk-sampling"});
    rows.appendChild(wkNode("tr")).append(...["piece", "softmax(logit / T)", "after top-k and top-p"].map(t => wkNode("th", {}, t)));
    p.top_ids.slice(0, 20).forEach((id, i) => {
      const tr = wkNode("tr", {class: result.keep[id] ? "" : "wk-removed", "data-id": String(id)});
      tr.append(wkNode("th", {}, p.top_pieces[i]), wkNode("td", {class: "wk-p"}, formatValue(result.plain[id])),
                wkNode("td", {class: "wk-q"}, result.keep[id] ? formatValue(result.probs[id]) : "removed"));
      rows.appendChild(tr);
    });
    const kept = result.probs.filter(x => x > 0).length;
    table.replaceChildren(rows, wkNode("p", {class: "wk-filtered"},
      `Top-k removes ${result.removedByK} pieces and top-p ${result.removedByP} more: sampling would draw from ${kept} of ` +
      `${logitsOf(p).length}. Greedy takes the first row whatever T is.`));
    box.dataset.drawMs = (performance.now() - started).toFixed(1);
  };
  box.append(control("temperature", "Temperature T", 0.05, 5, 0.05), control("topK", "Top-k (0 = off)", 0, 100, 1),
             control("topP", "Top-p", 0.05, 1, 0.05), table);
  redraw();
  return box;
}
