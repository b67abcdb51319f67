// The walk-through's data work (explorer/static/walk_data.js) against what Python computed for the same payload
// (tests/js/export_fixtures.py writes it, under "walk"; LIVE_FIXTURE names the file). Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const {resolveRefs, formatValue, shownValues, maxAbs, diverging, move, keyAction, blockOf, firstStageOf} =
  require("../../explorer/static/walk_data.js");

const fixturePath = process.env.LIVE_FIXTURE;
if (!fixturePath) throw new Error("LIVE_FIXTURE must name the file tests/js/export_fixtures.py wrote");
const fixture = JSON.parse(fs.readFileSync(path.resolve(fixturePath), "utf-8")).walk;
const payload = fixture.payload;

test("the payload sends repeated vectors once, and resolving gives back every stage's numbers", () => {
  const refs = payload.stages.flatMap(s => s.numbers).filter(n => n.values && n.values.ref);
  assert.ok(refs.length >= 5, `only ${refs.length} references`);
  assert.ok(payload.stages.flatMap(s => s.numbers).some(n => n.values && n.values.q), "no large matrix quantised");
  const resolved = resolveRefs(payload);
  resolved.stages.forEach((stage, i) => stage.numbers.forEach((n, j) => {
    const expected = fixture.values[i][j];
    if (n.kind === "matrix" && n.values.flat().length > 256) {  // large: whole numbers × a scale, to half a step
      const step = maxAbs(expected) / 99;
      n.values.flat().forEach((v, k) => {
        const e = expected.flat()[k];
        if (e === "-inf") assert.equal(v, "-inf");
        else assert.ok(Math.abs(v - e) <= step / 2 + 1e-6, `stage ${i + 1} ${n.name} ${k}: ${v} against ${e}`);
      });
    } else {
      assert.deepEqual(n.values, expected, `stage ${i + 1} ${n.name}`);
    }
  }));
  assert.ok(payload.stages.flatMap(s => s.numbers).some(n => n.values && n.values.ref), "the payload itself is unchanged");
});

test("numbers print as Python's values, masked scores as −∞", () => {
  const resolved = resolveRefs(payload);
  for (const stage of resolved.stages) {
    for (const n of stage.numbers) {
      if (n.kind !== "vector") continue;
      shownValues(n.values).forEach((text, i) => {
        const back = Number(text.replace("−", "-"));
        assert.ok(Math.abs(back - n.values[i]) <= 5e-3 * Math.abs(n.values[i]) + 1e-12, `${stage.key} ${n.name} ${i}: ${text}`);
      });
    }
  }
  assert.equal(formatValue("-inf"), "−∞");
  assert.equal(formatValue(true), "yes");
  assert.equal(formatValue(256), "256");
  const causal = resolved.stages.find(s => s.key === "decoder.decoder_self.scores").numbers.find(n => n.name === "masked_scores");
  causal.values.forEach((row, i) => row.forEach((v, j) => assert.equal(v === "-inf", j > i, `row ${i} col ${j}`)));
});

test("Next, Back and the arrow keys stay within the stages", () => {
  const total = payload.stages.length;
  assert.equal(move(1, -1, total), 1);
  assert.equal(move(total, 1, total), total);
  assert.equal(move(5, 1, total), 6);
  assert.equal(keyAction("ArrowRight"), 1);
  assert.equal(keyAction("ArrowLeft"), -1);
  assert.equal(keyAction("a"), 0);
});

test("each stage sits in the block Python gave it, and each block opens at its first stage", () => {
  fixture.blocks.forEach((block, i) => assert.equal(blockOf(payload, i + 1), block));
  for (const block of payload.blocks) {
    assert.equal(firstStageOf(payload, block.key), fixture.blocks.indexOf(block.key) + 1);
  }
  assert.deepEqual(payload.blocks.map(b => b.key), ["text", "input", "encoder", "cross", "decoder", "output"]);
});

test("colours: blue above 0, red below, grey for a masked score", () => {
  assert.match(diverging(1, 1), /^rgba\(37,99,235/);
  assert.match(diverging(-1, 2), /^rgba\(220,38,38,0\.450\)/);
  assert.match(diverging("-inf", 1), /^rgba\(128,128,128/);
  assert.equal(maxAbs([1, -3, "-inf", 2]), 3);
});
