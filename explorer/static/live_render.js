// The live attention view's drawing: every kind, layer, head and step of one translation, drawn here in the
// browser from one compact payload (weights quantised to bytes, deflated, base64), so that switching never asks the server.
// Runs as the js_on_load of a gr.HTML component, after live_data.js (the data work: decodeWeights, matrix,
// colour) and live_export.js (the downloads): `element`, `props` and `watch` come from Gradio. Labels come from the
// payload, set with textContent, never as markup.
const SVG = "http://www.w3.org/2000/svg";
const HEAD_NUMBER_FROM = 0.3;  // a line at least this strong carries its head's number
const HEAD_COLOURS = ["#2563eb", "#f97316", "#16a34a", "#db2777", "#7c3aed", "#0891b2", "#ca8a04", "#dc2626"];
const view = {kind: null, layer: null, head: "mean", mode: "heatmap", step: null, merge: false, focus: null,
              measure: "weights", headsOff: new Set(), payload: null, decoding: null, weights: {}, norms: {}};
const MEASURES = [["Attention weights α", "weights"], ["Weighted norms ‖α·f(x)‖", "norms"]];

function values() {  // what the maps show: the weights, or norm-based attention where the payload has norms
  return view.measure === "norms" && view.norms[view.kind] ? view.norms : view.weights;
}

function node(tag, attributes = {}, text = null, svg = false) {
  const el = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, v);
  if (text !== null) el.textContent = text;
  return el;
}

// Whether the payload's numbers are ready to draw. A new payload is inflated first (asynchronously), then drawn;
// the old picture stays until then, and a payload overtaken by a newer one is dropped.
function load() {
  const payload = props.value;
  if (!payload || !payload.kinds) { view.payload = view.decoding = null; return true; }
  if (payload === view.payload) return true;
  if (payload !== view.decoding) {
    view.decoding = payload;
    const root = element.querySelector(".ae-live");
    if (root) root.dataset.pending = "1";  // the open tab waits for this to go (wiring.py's AFTER_LIVE_VIEW_JS)
    decodeWeights(payload).then(async weights => {
      const norms = await weightedNorms(payload, weights);
      if (view.decoding !== payload) return;
      adopt(payload, weights, norms);
      draw();
    });
  }
  return false;
}

// the layer and head chosen, kept within the shown kind's stack (the encoder's and the decoder's shapes may differ):
// a layer beyond it becomes its last layer, a head beyond it the mean over its heads
function fit() {
  const map = view.payload.kinds[view.kind];
  if (view.layer !== "overview" && view.layer >= map.layers) view.layer = map.layers - 1;
  if (view.head !== "mean" && view.head >= map.heads) view.head = "mean";
}

function adopt(payload, weights, norms) {  // a decoded payload becomes the view's, opening where it says
  view.payload = payload;
  view.weights = weights;
  view.norms = norms;
  const start = payload.start || {};
  const opening = view.layer === null || start.restore;  // the first translation, or a shared link: its view
  view.kind = !opening && payload.kinds[view.kind] ? view.kind : (start.kind || "cross");
  view.layer = !opening && view.layer !== "overview" ? view.layer : (start.layer ?? payload.kinds[view.kind].layers - 1);
  if (opening && start.head !== undefined) view.head = start.head;
  fit();
  view.step = opening && start.step && start.step < payload.tgt.length ? start.step : null;
  view.focus = null;
}

// ALTI+ (Ferrando et al., 2022): how much of each output piece's prediction came from the source, the rest from the
// words before it, as a strip of the output with each piece's share filled in from the bottom
function shares(root) {
  const p = view.payload;
  if (!p.source_share) return;
  const strip = node("div", {class: "ae-shares"}, "From the source (ALTI+): ");
  p.tgt.forEach((token, t) => {
    const share = p.source_share[t], percent = Math.round(100 * share);
    strip.appendChild(node("span", {class: "ae-share", "data-share": share.toFixed(3),
      title: `${token}: ${percent}% from the source, ${100 - percent}% from the words before it`,
      style: `background: linear-gradient(to top, rgba(37, 99, 235, 0.35) ${percent}%, transparent ${percent}%)`}, token));
  });
  root.appendChild(strip);
}

function select(label, options, value, onChange, cls) {
  const wrap = node("label", {class: "ae-field"}, label + " ");
  const el = node("select", {class: cls});
  for (const [text, v] of options) {
    const o = node("option", {value: String(v)}, text);
    if (String(v) === String(value)) o.selected = true;
    el.appendChild(o);
  }
  el.addEventListener("change", () => onChange(el.value));
  wrap.appendChild(el);
  return wrap;
}

function toolbar(root) {
  const p = view.payload, bar = node("div", {class: "ae-toolbar"});
  bar.appendChild(select("Attention", Object.keys(p.kinds).map(k => [p.kinds[k].title, k]), view.kind,
    v => { view.kind = v; view.focus = null; fit(); draw(); }, "ae-kind"));
  const shape = p.kinds[view.kind];
  bar.appendChild(select("Layer", [...p.layer_labels.slice(0, shape.layers).map((label, l) => [label, l]),
                                   ["All layers × heads", "overview"]],
    view.layer, v => { view.layer = v === "overview" ? v : Number(v); draw(); }, "ae-layer"));
  bar.appendChild(select("Head", [["Mean over heads", "mean"],
                                  ...p.head_labels.slice(0, shape.heads).map((label, h) => [label, h])],
    view.head, v => { view.head = v === "mean" ? v : Number(v); draw(); }, "ae-head"));
  if (Object.keys(view.norms).length) {
    bar.appendChild(select("Show", MEASURES, view.measure, v => { view.measure = v; draw(); }, "ae-measure"));
  }
  const modes = node("span", {class: "ae-modes"});
  for (const [text, mode] of [["Heatmap", "heatmap"], ["Lines", "lines"]]) {
    const b = node("button", {type: "button", class: "ae-mode" + (view.mode === mode ? " ae-on" : ""), "data-mode": mode}, text);
    b.addEventListener("click", () => { view.mode = mode; if (view.layer === "overview") view.layer = shape.layers - 1; draw(); });
    modes.appendChild(b);
  }
  bar.appendChild(modes);
  const merge = node("label", {class: "ae-field"});
  const box = node("input", {type: "checkbox", class: "ae-merge"});
  box.checked = view.merge;
  box.addEventListener("change", () => { view.merge = box.checked; view.focus = null; draw(); });
  merge.append(box, " words");
  bar.appendChild(merge);
  const steps = p.tgt.length, stepWrap = node("label", {class: "ae-field"}, "Step ");
  const range = node("input", {type: "range", min: "1", max: String(steps), value: String(view.step || steps), class: "ae-step"});
  const shown = node("span", {class: "ae-step-label"}, view.step ? `${view.step} of ${steps}` : `all ${steps}`);
  range.addEventListener("input", () => { const k = Number(range.value); view.step = k === steps ? null : k; draw(); });
  stepWrap.append(range, shown);
  bar.appendChild(stepWrap);
  root.appendChild(bar);
}

function measureLabel() {
  return view.measure === "norms" ? "weighted norm (row share)" : "weight";
}

function heatmap(root) {
  const {m, rows, cols} = matrix(view.payload, values(), view.kind, view.layer, view.head, view.step, view.merge);
  const map = view.payload.kinds[view.kind];
  const cell = Math.max(14, Math.min(28, Math.floor(560 / Math.max(cols.length, 1))));
  const left = 8 + 7 * Math.max(...rows.map(r => r.length), 4), top = 8 + 6 * Math.max(...cols.map(c => c.length), 4);
  const width = left + cols.length * cell + 8, height = top + rows.length * cell + 8;
  const p = view.payload;
  const which = map.alti ? "every head, through the layers so far" :
    view.head === "mean" ? `mean of ${map.heads} heads` : p.head_labels[view.head].toLowerCase();
  const title = `${map.title}: ${p.layer_labels[view.layer].toLowerCase()}, ${which}` +
    (view.step ? `, step ${view.step}` : "") + (view.merge ? " (words)" : "");
  // the viewBox lets a narrow screen scale the whole map down (live_view.css) rather than cut its last columns; a
  // keyboard focuses it and moves over its cells with the arrow keys (keyCursor)
  const svg = node("svg", {width, height, viewBox: `0 0 ${width} ${height}`, class: "ae-heatmap", tabindex: "0",
                           role: "img", "aria-label": mapName(title, m, rows, cols) + ". Arrow keys move over the cells."},
                   null, true);
  cols.forEach((c, j) => {
    const x = left + j * cell + cell / 2;
    svg.appendChild(node("text", {x, y: top - 6, transform: `rotate(-60 ${x} ${top - 6})`, class: "ae-col-label"}, c, true));
  });
  // one head's pieces: a row label opens the query·key breakdown of that query (the page's Query · key tab)
  const breakable = typeof trigger === "function" && view.head !== "mean" && !view.merge && !map.alti;
  rows.forEach((r, i) => {
    const text = node("text", {x: left - 6, y: top + i * cell + cell * 0.7, "text-anchor": "end",
                               class: "ae-row-label" + (breakable ? " ae-breakable" : "")}, r, true);
    if (breakable) {
      text.addEventListener("click", () => trigger("select", {kind: view.kind, layer: view.layer, head: view.head, query: i}));
    }
    svg.appendChild(text);
  });
  m.forEach((row, i) => row.forEach((w, j) => {
    svg.appendChild(node("rect", {x: left + j * cell, y: top + i * cell, width: cell - 1, height: cell - 1, fill: colour(w),
                                  "data-weight": w.toFixed(3), "data-row": i, "data-col": j, class: "ae-cell"}, null, true));
  }));
  // one hover handler for the whole map (a title per cell made every redraw several times slower); the tip is a live
  // region, so what the arrow keys reach is announced
  const tip = node("div", {class: "ae-tip", role: "status", "aria-live": "polite"},
                   `hover a cell, or focus the map and use the arrow keys: query → key: ${measureLabel()}`);
  svg.addEventListener("mouseover", event => {
    const cellNode = event.target.closest && event.target.closest("rect.ae-cell");
    if (cellNode) tip.textContent = `query ${rows[cellNode.dataset.row]} → key ${cols[cellNode.dataset.col]}: ${cellNode.dataset.weight}`;
  });
  keyCursor(svg, tip, m, rows, cols, {left, top, cell});
  root.appendChild(node("div", {class: "ae-title"}, title +
    (view.measure === "norms" ? " · weighted norms ‖α·f(x)‖, each row scaled to sum to 1" : "")));
  root.appendChild(node("div", {class: "ae-axes"}, `rows: ${map.row_title} · columns: ${map.col_title}` +
    (breakable ? " · click a row's token for its query·key breakdown" : "")));
  root.appendChild(tip);
  const scroll = node("div", {class: "ae-scroll"});
  scroll.appendChild(svg);
  root.appendChild(scroll);
  root.appendChild(dataTable(title, m, rows, cols));
}

function lines(root) {
  const p = view.payload, map = p.kinds[view.kind], H = map.heads, gap = 20, width = 420;
  const heads = [...Array(H).keys()];
  const per = heads.map(h => matrix(p, values(), view.kind, view.layer, h, view.step, view.merge));
  const {rows, cols} = per[0];
  const height = 16 + Math.max(rows.length, cols.length) * gap;
  const title = `${map.title}: ${p.layer_labels[view.layer].toLowerCase()}, lines by head` + (view.step ? `, step ${view.step}` : "");
  const named = heads.filter(h => !view.headsOff.has(h)).map(h => {
    const best = strongestCell(per[h].m);
    return `head ${shown(h)}: '${rows[best.row]}' to '${cols[best.col]}' (${best.weight.toFixed(2)})`;
  });
  // focusable: the arrow keys move over the tokens (linesKeys), each move announced
  const svg = node("svg", {width, height, class: "ae-lines", role: "img", tabindex: "0",
                           "aria-label": `${title}; strongest line of each head: ${named.join("; ")}. ` +
                                         "Arrow keys move over the tokens."}, null, true);
  const keyX = 110, queryX = width - 110;
  const links = node("g", {}, null, true);
  svg.appendChild(links);
  heads.forEach(h => {
    if (view.headsOff.has(h)) return;
    per[h].m.forEach((row, i) => row.forEach((w, j) => {
      if (w < 0.02) return;
      if (view.focus && !((view.focus.side === "query" && view.focus.index === i) || (view.focus.side === "key" && view.focus.index === j))) return;
      links.appendChild(node("line", {x1: keyX + 4, y1: 16 + j * gap - 4, x2: queryX - 4, y2: 16 + i * gap - 4,
        stroke: HEAD_COLOURS[h % HEAD_COLOURS.length], "stroke-opacity": Math.min(1, w).toFixed(3), "stroke-width": 2,
        "data-head": h, "data-query": i, "data-key": j, class: "ae-link"}, null, true));
      // a strong line carries its head's number near its query, in the text's colour (4.5:1), so no head is
      // told by colour alone
      if (w >= HEAD_NUMBER_FROM) {
        const x = queryX - 4 - 28 - 10 * (h % 4), y = 16 + i * gap - 4 + ((16 + j * gap) - (16 + i * gap)) * (38 + 10 * (h % 4)) / (queryX - keyX);
        links.appendChild(node("text", {x, y: y - 2, class: "ae-link-head", "data-head": h}, String(shown(h)), true));
      }
    }));
  });
  const label = (text, x, y, anchor, side, index) => {
    const t = node("text", {x, y, "text-anchor": anchor, class: `ae-token ae-${side}` + (view.focus && view.focus.side === side && view.focus.index === index ? " ae-focus" : ""),
                            "data-side": side, "data-index": index}, text, true);
    const set = () => {  // redraw only when the focus moves: the redrawn token is under the pointer again
      if (view.focus && view.focus.side === side && view.focus.index === index) return;
      view.focus = {side, index};
      draw();
    };
    t.addEventListener("mouseenter", set);
    t.addEventListener("click", set);
    svg.appendChild(t);
  };
  cols.forEach((c, j) => label(c, keyX, 16 + j * gap, "end", "key", j));
  rows.forEach((r, i) => label(r, queryX, 16 + i * gap, "start", "query", i));
  svg.addEventListener("mouseleave", () => { if (view.focus) { view.focus = null; draw(); } });
  linesKeys(svg, per, rows, cols);
  root.appendChild(node("div", {class: "ae-title"}, title + (view.measure === "norms" ? " · weighted norms" : "")));
  root.appendChild(node("div", {class: "ae-axes"}, `left: ${map.col_title} · right: ${map.row_title}; hover a token to ` +
    "follow it, or focus the picture and use the arrow keys; a strong line carries its head's number"));
  const legend = node("div", {class: "ae-legend"});
  heads.forEach(h => {
    const b = node("button", {type: "button", class: "ae-head-toggle" + (view.headsOff.has(h) ? "" : " ae-on"), "data-head": h,
                              "aria-pressed": String(!view.headsOff.has(h)),
                              style: `border-color:${HEAD_COLOURS[h % HEAD_COLOURS.length]}`}, p.head_labels[h].toLowerCase());
    b.addEventListener("click", () => { view.headsOff.has(h) ? view.headsOff.delete(h) : view.headsOff.add(h); draw(); });
    legend.appendChild(b);
  });
  root.appendChild(legend);
  const scroll = node("div", {class: "ae-scroll"});
  scroll.appendChild(svg);
  root.appendChild(scroll);
}

function overview(root) {
  const p = view.payload, map = p.kinds[view.kind];
  root.appendChild(node("div", {class: "ae-title"}, `${map.title}: every layer × head (click a tile to open it)` +
    (view.measure === "norms" ? " · weighted norms" : "")));
  const H = map.heads;
  const grid = node("div", {class: "ae-grid", style: `grid-template-columns: repeat(${H}, auto)`});
  for (let l = 0; l < map.layers; l++) for (let h = 0; h < H; h++) {
    const {m, rows, cols} = matrix(p, values(), view.kind, l, h, view.step, view.merge), cell = Math.max(3, Math.floor(120 / Math.max(cols.length, rows.length)));
    const tile = node("button", {type: "button", class: "ae-tile", "data-layer": l, "data-head": h, title: `${p.layer_labels[l]}, ${p.head_labels[h].toLowerCase()}`});
    tile.appendChild(node("span", {class: "ae-tile-title"}, p.tile_labels[l][h]));
    const svg = node("svg", {width: cols.length * cell, height: rows.length * cell}, null, true);
    m.forEach((row, i) => row.forEach((w, j) => svg.appendChild(node("rect", {x: j * cell, y: i * cell, width: cell, height: cell, fill: colour(w)}, null, true))));
    tile.appendChild(svg);
    tile.addEventListener("click", () => { view.layer = l; view.head = h; view.mode = "heatmap"; draw(); });
    grid.appendChild(tile);
  }
  root.appendChild(grid);
}

function draw() {
  const root = element.querySelector(".ae-live");
  if (!root) return;
  if (!load()) return;
  root.replaceChildren();
  if (!view.payload) { root.appendChild(node("div", {class: "ae-empty"}, "Translate a sentence to see its attention here.")); return; }
  shares(root);
  toolbar(root);
  if (view.layer === "overview") overview(root); else if (view.mode === "lines") lines(root); else heatmap(root);
  downloads(root);
  root.dataset.state = JSON.stringify({kind: view.kind, layer: view.layer, head: view.head, mode: view.mode, step: view.step});
  // the same view as a link numbers it, from 1 (share.py's LINK_JS reads it)
  root.dataset.link = JSON.stringify({kind: view.kind, layer: view.layer === "overview" ? null : shown(view.layer),
                                      head: view.head === "mean" ? "mean" : shown(view.head), step: view.step});
  delete root.dataset.pending;
  root.dataset.measure = view.measure;
}

draw();
watch("value", draw);
