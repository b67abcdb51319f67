// The walk-through's data work, pure functions of the payload (explorer/views/walkthrough_payload.py) and nothing
// else: the pooled arrays decoded, a stage at any layer and head, numbers formatted as the page prints them, the stage
// moves of Next/Back and the arrow keys, the blocks of the overview, the colours and names of a value, and the output
// stage's temperature, top-k and top-p over the whole vocabulary. Layers and heads are 0-based here; static/head_ref.js
// (`shown`, `fromShown`: loaded before this file on the page, required under node) numbers them from 1.
// No DOM here: tests/js/walk_data.test.js runs these with `node --test` against fixtures Python exports.
if (typeof module !== "undefined" && typeof shown === "undefined") var {shown, fromShown} = require("./head_ref.js");

function base64Bytes(text) {
  if (typeof Buffer !== "undefined") return new Uint8Array(Buffer.from(text, "base64"));
  const raw = atob(text), bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

// IEEE half precision to a number (the payload's float16, little-endian)
function halfToNumber(h) {
  const sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
  if (exponent === 0) return sign * fraction * 2 ** -24;
  if (exponent === 31) return fraction ? NaN : sign * Infinity;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

// The payload as sent (walkthrough_payload.py's walk_payload): its header, and "document" (the stages' JSON) and
// "data" (the numbers' binary block), each deflated and base64, inflated by the browser's own DecompressionStream
// (Node has it too). The result is the whole payload, each pool entry and the logits holding their bytes.
async function inflate(text) {
  const stream = new Blob([base64Bytes(text)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function unpackPayload(sent) {
  const {document, data, ...header} = sent;
  const [text, block] = await Promise.all([inflate(document), inflate(data)]);
  const payload = {...header, ...JSON.parse(new TextDecoder().decode(text))};
  const bytes = where => block.subarray(where.offset, where.offset + where.length);
  payload.pool.forEach(entry => { entry.bytes = bytes(entry); });
  payload.logits = {...payload.logits, exact: bytes(payload.logits.exact), below: bytes(payload.logits.below)};
  return payload;
}

// A flat list of numbers from a pool entry's bytes (its dtype: f16, f32, or i8 times its scale), -Infinity written
// "-inf" as the API writes it
function decodeFlat(entry) {
  const bytes = entry.bytes, view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), out = [];
  if (entry.dtype === "f16") for (let i = 0; i < bytes.length; i += 2) out.push(halfToNumber(view.getUint16(i, true)));
  else if (entry.dtype === "f32") for (let i = 0; i < bytes.length; i += 4) out.push(view.getFloat32(i, true));
  else for (let i = 0; i < bytes.length; i++) { const q = view.getInt8(i); out.push(q === -128 ? -Infinity : q * entry.scale); }
  return out.map(v => (v === -Infinity ? "-inf" : v));
}

function decodeEntry(entry) {
  const flat = decodeFlat(entry);
  if (entry.shape.length < 2) return flat;
  const cols = entry.shape[1], rows = [];
  for (let i = 0; i < entry.shape[0]; i++) rows.push(flat.slice(i * cols, (i + 1) * cols));
  return rows;
}

// The unpacked payload with a cache for its pool: each array is decoded the first time a stage shows it
function decodePayload(payload) {
  return {...payload, decoded: new Array(payload.pool.length), logitValues: null};
}

function pooled(payload, index) {
  if (payload.decoded[index] === undefined) payload.decoded[index] = decodeEntry(payload.pool[index]);
  return payload.decoded[index];
}

// the step's logits over the whole vocabulary, decoded when the output stage first needs them
function logitsOf(payload) {
  if (!payload.logitValues) payload.logitValues = decodeLogits(payload.logits);
  return payload.logitValues;
}

const ARRAY_KINDS = new Set(["vector", "row", "matrix"]);

// Which of a stage's versions shows layer `layer` and head `head` (0-based)
function variantIndex(stage, layer, head, heads) {
  if (stage.per === "head") return layer * heads + head;
  if (stage.per === "layer") return layer;
  return 0;
}

// A stage (number from 1) at a layer and head: its shared fields, its version's words, and its numbers' values
function stageAt(payload, number, layer, head) {
  const stage = payload.stages[number - 1], first = stage.variants[0];
  const version = stage.variants[variantIndex(stage, layer, head, payload.heads)] || first;
  const numbers = (version.numbers || first.numbers).map((n, i) => {
    const raw = version.values && !version.numbers ? version.values[i] : n.values;
    const values = ARRAY_KINDS.has(n.kind) && typeof raw === "number" ? pooled(payload, raw) : raw;
    return {...n, values};
  });
  const {variants, ...shared} = stage;
  return {...shared, title: version.title ?? first.title, text: version.text ?? first.text,
          why: version.why ?? first.why, ask: version.ask ?? first.ask, numbers};
}

// "predict first": what the stage's softmax ranks first (its weights or probabilities row), to reveal after a guess
function answerOf(stage) {
  const row = stage.numbers.find(n => n.kind === "row" && (n.name === "weights" || n.name === "probabilities"));
  if (!row) return null;
  let best = 0;
  row.values.forEach((v, i) => { if (v > row.values[best]) best = i; });
  return {piece: row.cols[best], value: row.values[best], index: best};
}

// The stage with `key` in a walk (a new piece or step keeps the stage a teacher was on), else stage 1
function stageForKey(payload, key) {
  const found = payload.stages.find(s => s.key === key);
  return found ? found.number : 1;
}

// One number as printed and as hovered: "−∞" for a masked score, else 3 significant digits
function formatValue(v) {
  if (v === "-inf" || v === -Infinity) return "−∞";
  if (v === "inf") return "∞";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return Number(v.toPrecision(3)).toString().replace("-", "−");
}

function shownValues(values, count = 8) {
  return values.slice(0, count).map(formatValue);
}

function maxAbs(values) {
  let m = 0;
  for (const v of values.flat ? values.flat() : values) if (typeof v === "number" && Math.abs(v) > m) m = Math.abs(v);
  return m;
}

// One colour scale for every vector of a stage: vectors added together are compared on one scale
function vectorScale(stage) {
  return Math.max(0, ...stage.numbers.filter(n => n.kind === "vector").map(n => maxAbs(n.values)));
}

function hasMasked(values) {
  return (values.flat ? values.flat() : values).some(v => v === "-inf");
}

// A diverging colour: blue for positive, red for negative, transparent at 0; -inf (masked) grey. `strongest` is the
// opacity at the scale's end: 0.9 for a picture, TEXT_OPACITY under a number, where the page's text colour keeps
// 4.5:1 on the blend in light and dark (WCAG 2.1 AA 1.4.3: at 0.9 dark text on blue measured 3.4:1)
const TEXT_OPACITY = 0.45;
function diverging(v, scale, strongest = 0.9) {
  if (typeof v !== "number") return `rgba(128,128,128,${Math.min(0.55, strongest)})`;
  const t = scale > 0 ? Math.max(-1, Math.min(1, v / scale)) : 0;
  return t >= 0 ? `rgba(37,99,235,${(strongest * t).toFixed(3)})` : `rgba(220,38,38,${(-strongest * t).toFixed(3)})`;
}

// What a hovered cell is: "query 4 · key 6" (from the numbers' axes, counted from 1), or its column's label
function cellName(numbers, row, col) {
  const [rowAxis, colAxis] = numbers.axes || ["", ""];
  const parts = [];
  if (numbers.kind === "matrix") parts.push(rowAxis ? `${rowAxis} ${shown(row)}` : (numbers.rows || [])[row] || `row ${shown(row)}`);
  if (colAxis) parts.push(`${colAxis} ${shown(col)}` + (numbers.cols && colAxis !== "feature" ? ` (${numbers.cols[col]})` : ""));
  else if (numbers.cols) parts.push(numbers.cols[col]);
  return parts.join(" · ");
}

// Next/Back and the arrow keys: the stage number (from 1) after moving by `delta`, kept within [1, total].
function move(current, delta, total) {
  return Math.max(1, Math.min(total, current + delta));
}

// Only the arrow keys move stages, and only while the walk has the focus: PageDown and PageUp stay the page's
function keyAction(key) {
  return {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1}[key] || 0;
}

function blockOf(payload, number) {
  return payload.stages[number - 1].block;
}

function firstStageOf(payload, block) {
  const found = payload.blocks.find(b => b.key === block);
  return found ? found.stages[0] : null;
}

// The step's logits over the whole vocabulary: float16 distances below the largest, the largest ones exact
function decodeLogits(compact) {
  const below = decodeFlat({dtype: "f16", bytes: compact.below}), exact = decodeFlat({dtype: "f32", bytes: compact.exact});
  const out = new Float64Array(compact.size);
  for (let i = 0; i < compact.size; i++) out[i] = below[i] === "-inf" || below[i] === Infinity ? -Infinity : compact.largest - below[i];
  compact.top.forEach((id, i) => { out[id] = exact[i]; });
  return out;
}

// The output stage's sliders, as transformer/decoding/strategies/sampling.py computes them: logits / T, top-k (ties
// with the k-th kept), softmax, then top-p (a piece dropped when the more probable ones before it reach p; the first
// stays), renormalised. `plain`: softmax(logits / T) before any filter; `probs`: after; counts of what each removed.
function sampling(logits, temperature, topK, topP) {
  const n = logits.length, scaled = new Float64Array(n);
  for (let i = 0; i < n; i++) scaled[i] = logits[i] / temperature;
  const order = Array.from(scaled.keys()).sort((a, b) => scaled[b] - scaled[a]);
  const softmax = keep => {
    let largest = -Infinity, total = 0;
    for (let i = 0; i < n; i++) if (keep[i] && scaled[i] > largest) largest = scaled[i];
    const p = new Float64Array(n);
    for (let i = 0; i < n; i++) if (keep[i] && scaled[i] > -Infinity) { p[i] = Math.exp(scaled[i] - largest); total += p[i]; }
    for (let i = 0; i < n; i++) p[i] /= total;
    return p;
  };
  const all = new Array(n).fill(true), plain = softmax(all);
  const keepK = all.slice();
  if (topK > 0) {
    const kth = scaled[order[Math.min(topK, n) - 1]];
    for (let i = 0; i < n; i++) keepK[i] = scaled[i] >= kth;
  }
  const afterK = softmax(keepK), keep = keepK.slice();
  if (topP < 1) {
    let before = 0;
    for (const i of order) { if (!keepK[i]) continue; keep[i] = before < topP; before += afterK[i]; }
  }
  const probs = softmax(keep);
  const count = mask => mask.reduce((c, k) => c + (k ? 0 : 1), 0);
  return {plain, probs, keepK, keep, order, removedByK: count(keepK), removedByP: count(keep) - count(keepK)};
}

if (typeof module !== "undefined") {
  module.exports = {halfToNumber, unpackPayload, decodeFlat, decodeEntry, decodePayload, pooled, logitsOf, variantIndex, stageAt,
                    stageForKey, answerOf, formatValue, shownValues, maxAbs, vectorScale, hasMasked, diverging, TEXT_OPACITY, cellName, move,
                    keyAction, blockOf, firstStageOf, decodeLogits, sampling};
}
