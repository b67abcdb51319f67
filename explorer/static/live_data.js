// The live view's data work, pure functions of the payload (explorer/live_payload.py) and nothing else:
// the weights inflated from bytes, norm-based attention from them, one head or the mean over heads, the prefix at a
// decoding step, and pieces merged to words with the groups and labels the payload carries
// (transformer/decoding/words.py made them).
// No DOM here: tests/js/live_data.test.js runs these with `node --test` against fixtures Python exports.

// base64 of deflated bytes (live_payload.py's packed) to values in [0, 1], inflated by the browser's own
// DecompressionStream (Node has it too)
async function unpack(text) {
  const binary = atob(text), bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  const inflated = new Uint8Array(await new Response(stream).arrayBuffer());
  const values = new Float32Array(inflated.length);
  for (let i = 0; i < inflated.length; i++) values[i] = inflated[i] / 255;
  return values;
}

// Every map is inflated at once rather than one after another: each inflation is a round through the browser's
// stream machinery, which resumes only when the main thread is free
async function decodeWeights(payload) {  // {kind: Float32Array (L, H, rows, cols) row-major}
  const kinds = Object.entries(payload.kinds);
  const values = await Promise.all(kinds.map(([, map]) => unpack(map.q)));
  return Object.fromEntries(kinds.map(([kind], i) => [kind, values[i]]));
}

// Norm-based attention (Kobayashi et al., 2020): α_ij ‖f(x_j)‖, the weight times the norm of what the head moves
// from key j (the payload's norms, relative to the head's largest), each query row then scaled to sum to 1 so it
// reads on the weights' colour scale: the share of what the query received that came from each key.
// {kind: Float32Array} like decodeWeights.
async function weightedNorms(payload, weights) {
  const out = {};
  const kinds = Object.entries(payload.kinds).filter(([, map]) => map.norms);  // ALTI+ has no such reading
  const allNorms = await Promise.all(kinds.map(([, map]) => unpack(map.norms)));
  kinds.forEach(([kind, map], index) => {
    const norms = allNorms[index];
    const R = map.rows.length, C = map.cols.length, w = weights[kind], values = new Float32Array(w.length);
    const LH = map.layers * map.heads;  // each kind its own stack's shape
    for (let lh = 0; lh < LH; lh++) for (let r = 0; r < R; r++) {
      const row = (lh * R + r) * C;
      let sum = 0;
      for (let c = 0; c < C; c++) { values[row + c] = w[row + c] * norms[lh * C + c]; sum += values[row + c]; }
      if (sum > 0) for (let c = 0; c < C; c++) values[row + c] /= sum;
    }
    out[kind] = values;
  });
  return out;
}

// (rows x cols) weights of one head, or the mean over heads ("mean"), cut to the decoding step (1-based; null:
// the whole output) and, with merge, pieces merged to words: mean over a word's query pieces, sum over its keys
function matrix(payload, weights, kind, layer, head, step = null, merge = false) {
  const map = payload.kinds[kind], R = map.rows.length, C = map.cols.length, H = map.heads;
  const values = weights[kind];
  const heads = head === "mean" || head >= H ? [...Array(H).keys()] : [head];  // a kind of one "head": that one
  let m = map.rows.map((_, r) => map.cols.map((_, c) =>
    heads.reduce((s, h) => s + values[((layer * H + h) * R + r) * C + c], 0) / heads.length));
  let rows = map.rows, cols = map.cols, rowWords = map.row_words, colWords = map.col_words;
  if (step && kind !== "encoder_self") {  // at step k the target side is the prefix so far
    m = m.slice(0, step); rows = rows.slice(0, step); rowWords = prefixWords(rowWords, step);
    if (map.step_cols !== undefined) {  // its target-side columns after the first step_cols: the prefix so far too
      const keep = map.step_cols + step;
      m = m.map(row => row.slice(0, keep)); cols = cols.slice(0, keep); colWords = prefixWords(colWords, keep);
    }
  }
  if (merge) {
    const summed = m.map(row => colWords.groups.map(g => g.reduce((s, c) => s + row[c], 0)));
    m = rowWords.groups.map(g => colWords.groups.map((_, j) => g.reduce((s, r) => s + summed[r][j], 0) / g.length));
    rows = rowWords.labels; cols = colWords.labels;
  }
  return {m, rows, cols};
}

function prefixWords(words, step) {  // the words of the first `step` pieces (a word cut short keeps its pieces so far)
  const groups = [], labels = [];
  words.groups.forEach((g, i) => {
    const kept = g.filter(index => index < step);
    if (kept.length === g.length) { groups.push(g); labels.push(words.labels[i]); }
    else if (kept.length) { groups.push(kept); labels.push(words.prefix_labels[i][kept.length - 1]); }
  });
  return {groups, labels};
}

function colour(w) {  // light yellow to dark blue, readable in light and dark mode
  const t = Math.max(0, Math.min(1, w));
  return `rgb(${Math.round(255 - 225 * t)}, ${Math.round(250 - 170 * t)}, ${Math.round(200 - 40 * t)})`;
}

// Words for a map, for a screen reader and a keyboard (WCAG 2.1 AA 1.1.1): the strongest cell of `m` (rows x cols), and
// what one row attends to, most first: "'Hund' attends most to 'dog' (0.82), then 'The' (0.10)"
function strongestCell(m) {
  let best = {row: 0, col: 0, weight: -Infinity};
  m.forEach((row, i) => row.forEach((w, j) => { if (w > best.weight) best = {row: i, col: j, weight: w}; }));
  return best;
}

function attendsText(m, rows, cols, i) {
  const order = m[i].map((_, j) => j).sort((a, b) => m[i][b] - m[i][a] || a - b);
  const [first, second] = order;
  let text = `'${rows[i]}' attends most to '${cols[first]}' (${m[i][first].toFixed(2)})`;
  if (second !== undefined && m[i][second] >= 0.005) text += `, then '${cols[second]}' (${m[i][second].toFixed(2)})`;
  return text;
}

function mapName(title, m, rows, cols) {
  if (!m.length || !m[0].length) return title;
  const best = strongestCell(m);
  return `${title}: '${rows[best.row]}' attends most to '${cols[best.col]}' (${best.weight.toFixed(2)})`;
}

if (typeof module !== "undefined") {
  module.exports = {decodeWeights, weightedNorms, matrix, colour, strongestCell, attendsText, mapName};
}
