// The walk-through's data work (explorer/static/walk_data.js) against what Python computed for the same walk
// (tests/js/export_fixtures.py writes it, under "walk"; LIVE_FIXTURE names the file). Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const walkData = require("../../explorer/static/walk_data.js");
const {unpackPayload, decodePayload, stageAt, stageForKey, formatValue, shownValues, maxAbs, diverging, cellName, move, keyAction,
       blockOf, firstStageOf, sampling, halfToNumber, vectorScale, answerOf, logitsOf} = walkData;

const fixturePath = process.env.LIVE_FIXTURE;
if (!fixturePath) throw new Error("LIVE_FIXTURE must name the file tests/js/export_fixtures.py wrote");
const fixture = JSON.parse(fs.readFileSync(path.resolve(fixturePath), "utf-8")).walk;
let payload, unpacked;  // the payload as sent, inflated (walk_data.js's unpackPayload), then with its pool's cache
test.before(async () => {
  unpacked = await unpackPayload(fixture.payload);
  payload = decodePayload(unpacked);
});

// float16 keeps 11 significant bits: a value is within 2^-11 of itself (relative), plus the smallest step near 0
const HALF = (x) => Math.abs(x) * 2 ** -11 + 2 ** -24;

function agrees(shown, sent, quantised) {
  if (sent === "-inf") return shown === "-inf";
  if (typeof sent !== "number") return JSON.stringify(shown) === JSON.stringify(sent);
  return Math.abs(shown - sent) <= (quantised ? quantised / 2 + 1e-6 : HALF(sent) + 1e-6);  // the API's 6 decimals
}

test("every stage at several layers and heads decodes to what the API sends", () => {
  for (const view of fixture.views) {
    view.stages.forEach((expected, i) => {
      const stage = stageAt(payload, i + 1, view.layer, view.head);
      assert.equal(stage.title, expected.title);
      stage.numbers.forEach((n, j) => {
        const sent = expected.values[j];
        const flat = Array.isArray(sent) ? sent.flat() : [sent], got = Array.isArray(n.values) ? n.values.flat() : [n.values];
        assert.equal(got.length, flat.length, `${stage.key} ${n.name}`);
        // a matrix of keys or values goes as whole numbers × one scale: half a step is its error
        const step = n.kind === "matrix" && (flat.length > 256 || ["keys", "values"].includes(n.name)) ? maxAbs(flat) / 127 * 1.000001 : 0;
        got.forEach((v, k) => assert.ok(agrees(v, flat[k], step), `${stage.key} L${view.layer} H${view.head} ${n.name}[${k}]: ${v} against ${flat[k]}`));
      });
    });
  }
});

test("a layer or head change keeps the stage; a new walk keeps the stage by its key", () => {
  const number = fixture.keys.indexOf("decoder.cross.softmax") + 1;
  const a = stageAt(payload, number, 0, 0), b = stageAt(payload, number, 1, 2);
  assert.equal(a.key, b.key);
  assert.notDeepEqual(a.numbers[0].values, b.numbers[0].values);
  assert.match(b.title, /^Decoder layer 2, head 3: /);
  assert.equal(stageForKey(payload, "decoder.cross.softmax"), number);
  assert.equal(stageForKey(payload, "no such stage"), 1);
});

test("numbers print at 3 significant digits, masked scores as −∞, and hover names the cell", () => {
  assert.equal(formatValue("-inf"), "−∞");
  assert.equal(formatValue(true), "yes");
  assert.equal(formatValue(256), "256");
  assert.equal(formatValue(1.33679), "1.34");
  assert.deepEqual(shownValues([0.123456, -2.5]), ["0.123", "−2.5"]);
  const causal = stageAt(payload, fixture.keys.indexOf("decoder.decoder_self.scores") + 1, 0, 0)
    .numbers.find(n => n.name === "masked_scores");
  causal.values.forEach((row, i) => row.forEach((v, j) => assert.equal(v === "-inf", j > i, `row ${i} col ${j}`)));
  assert.equal(cellName(causal, 3, 5).split(" (")[0], "query 4 · key 6");
  assert.equal(halfToNumber(0x3c00), 1);
  assert.equal(halfToNumber(0xfc00), -Infinity);
});

test("Next, Back and the arrow keys stay within the stages; PageDown is the page's", () => {
  const total = payload.stages.length;
  assert.equal(move(1, -1, total), 1);
  assert.equal(move(total, 1, total), total);
  assert.equal(move(5, 1, total), 6);
  assert.equal(keyAction("ArrowRight"), 1);
  assert.equal(keyAction("ArrowLeft"), -1);
  assert.equal(keyAction("PageDown"), 0);
  assert.equal(keyAction("PageUp"), 0);
});

test("blocks follow the architecture and each opens at its first stage", () => {
  fixture.blocks.forEach((block, i) => assert.equal(blockOf(payload, i + 1), block));
  for (const block of payload.blocks) assert.equal(firstStageOf(payload, block.key), fixture.blocks.indexOf(block.key) + 1);
  assert.deepEqual(payload.blocks.map(b => b.key), ["text", "input", "encoder", "target", "decoder", "output"]);
  const decoder = payload.blocks.find(b => b.key === "decoder");
  assert.deepEqual(decoder.groups.map(g => g.key), ["self", "cross", "ff", "layers"]);
  const flat = payload.blocks.flatMap(b => b.stages);
  assert.deepEqual(flat, flat.slice().sort((x, y) => x - y));
});

test("temperature, top-k and top-p over the whole vocabulary agree with the sampling strategy's", () => {
  for (const c of fixture.sampled) {
    const result = sampling(logitsOf(payload), c.temperature, c.top_k, c.top_p);
    c.ids.forEach((id, i) => {
      // float32 logits for the largest ones; the rest float16 below the largest, far less probable
      assert.ok(Math.abs(result.plain[id] - c.plain[i]) <= 1e-6 + 1e-5 * c.plain[i], `T=${c.temperature} ${id}`);
      assert.ok(Math.abs(result.probs[id] - c.probs[i]) <= 1e-6 + 1e-5 * c.probs[i], `${JSON.stringify(c)} ${id}: ${result.probs[id]}`);
    });
    assert.equal(result.probs.filter(p => p > 0).length, c.kept);
  }
});

test("colours: blue above 0, red below, grey for a masked score; one scale per stage's vectors", () => {
  assert.match(diverging(1, 1), /^rgba\(37,99,235/);
  assert.match(diverging(-1, 2), /^rgba\(220,38,38,0\.450\)/);
  assert.match(diverging("-inf", 1), /^rgba\(128,128,128/);
  assert.equal(maxAbs([1, -3, "-inf", 2]), 3);
  const input = stageAt(payload, fixture.keys.indexOf("encoder.input") + 1, 0, 0);
  assert.equal(vectorScale(input), Math.max(...input.numbers.filter(n => n.kind === "vector").map(n => maxAbs(n.values))));
});

test("predict first: the answer revealed is what the softmax ranks first", () => {
  const output = stageAt(payload, fixture.keys.indexOf("output.softmax") + 1, 0, 0);
  assert.ok(output.ask.includes("which piece"));
  assert.equal(answerOf(output).piece, unpacked.top_pieces[0]);
  const cross = stageAt(payload, fixture.keys.indexOf("decoder.cross.softmax") + 1, 1, 2);
  const weights = fixture.views[2].stages[fixture.keys.indexOf("decoder.cross.softmax")].values[0];
  assert.equal(answerOf(cross).index, weights.indexOf(Math.max(...weights)));
  assert.equal(answerOf(stageAt(payload, 1, 0, 0)), null);
});
