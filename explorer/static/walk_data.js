// The walk-through's data work, pure functions of the payload (explorer/views/walkthrough_payload.py) and nothing
// else: repeated vectors resolved, numbers formatted as the page prints them, the stage moves of Next/Back and the
// arrow keys, which block of the overview a stage sits in, and the colours of a value.
// No DOM here: tests/js/walk_data.test.js runs these with `node --test` against fixtures Python exports.

// A vector a stage shows again comes as {ref: [stage number (from 1), index in its numbers]}: the first copy's values.
// A large matrix comes as {scale, q}: whole numbers times the scale (masked scores stay "-inf").
function resolveRefs(payload) {
  const stages = payload.stages.map(stage => ({...stage, numbers: stage.numbers.map(n => ({...n}))}));
  for (const stage of stages) {
    for (const numbers of stage.numbers) {
      const v = numbers.values;
      if (v && !Array.isArray(v) && typeof v === "object" && v.ref) {
        numbers.values = stages[v.ref[0] - 1].numbers[v.ref[1]].values;
      } else if (v && !Array.isArray(v) && typeof v === "object" && v.q) {  // a large matrix: whole numbers × scale
        numbers.values = v.q.map(row => row.map(x => (typeof x === "number" ? x * v.scale : x)));
      }
    }
  }
  return {...payload, stages};
}

// One number as printed: "−∞" for a masked score, else 3 significant digits (the payload's precision).
function formatValue(v) {
  if (v === "-inf") return "−∞";
  if (v === "inf") return "∞";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return Number(v.toPrecision(3)).toString().replace("-", "−");
}

// The first `count` features of a vector, the ones printed beside its strip.
function shownValues(values, count = 8) {
  return values.slice(0, count).map(formatValue);
}

function maxAbs(values) {
  let m = 0;
  for (const v of values.flat ? values.flat() : values) if (typeof v === "number" && Math.abs(v) > m) m = Math.abs(v);
  return m;
}

// A diverging colour: blue for positive, red for negative, transparent at 0; -inf (masked) grey.
function diverging(v, scale) {
  if (typeof v !== "number") return "rgba(128,128,128,0.55)";
  const t = scale > 0 ? Math.max(-1, Math.min(1, v / scale)) : 0;
  return t >= 0 ? `rgba(37,99,235,${(0.9 * t).toFixed(3)})` : `rgba(220,38,38,${(-0.9 * t).toFixed(3)})`;
}

// Next/Back and the arrow keys: the stage number (from 1) after moving by `delta`, kept within [1, total].
function move(current, delta, total) {
  return Math.max(1, Math.min(total, current + delta));
}

function keyAction(key) {
  return {ArrowRight: 1, ArrowDown: 1, PageDown: 1, ArrowLeft: -1, ArrowUp: -1, PageUp: -1}[key] || 0;
}

// The overview block a stage (number from 1) belongs to, and the first stage of a block.
function blockOf(payload, number) {
  return payload.stages[number - 1].block;
}

function firstStageOf(payload, block) {
  const found = payload.blocks.find(b => b.key === block);
  return found ? found.stages[0] : null;
}

if (typeof module !== "undefined") {
  module.exports = {resolveRefs, formatValue, shownValues, maxAbs, diverging, move, keyAction, blockOf, firstStageOf};
}
