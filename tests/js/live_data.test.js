// The live view's data work (explorer/static/live_data.js) against what Python computes for the same payload
// (tests/js/export_fixtures.py writes it; LIVE_FIXTURE names the file). Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const {decodeWeights, weightedNorms, matrix, colour} = require("../../explorer/static/live_data.js");

const fixturePath = process.env.LIVE_FIXTURE;
if (!fixturePath) throw new Error("LIVE_FIXTURE must name the file tests/js/export_fixtures.py wrote");
const fixture = JSON.parse(fs.readFileSync(path.resolve(fixturePath), "utf-8"));
const payload = fixture.payload;
let weights, norms;  // inflated once, before the tests run
test.before(async () => {
  weights = await decodeWeights(payload);
  norms = await weightedNorms(payload, weights);
});

test("the bytes decode to one weight per layer, head, row and column", () => {
  for (const [kind, map] of Object.entries(payload.kinds)) {
    assert.equal(weights[kind].length, map.layers * map.heads * map.rows.length * map.cols.length, kind);
  }
});

for (const c of fixture.cases) {
  test(`${c.measure} ${c.kind} layer ${c.layer} head ${c.head} step ${c.step} ${c.merge ? "words" : "pieces"} matches Python`, () => {
    const got = matrix(payload, c.measure === "norms" ? norms : weights, c.kind, c.layer, c.head, c.step, c.merge);
    assert.deepEqual(got.rows, c.rows);
    assert.deepEqual(got.cols, c.cols);
    assert.equal(got.m.length, c.m.length);
    got.m.forEach((row, i) => row.forEach((w, j) => assert.ok(Math.abs(w - c.m[i][j]) < 1e-5,
      `row ${i} col ${j}: ${w} against ${c.m[i][j]}`)));
  });
}

test("weighted norms: every kind, each row a share summing to 1, and not the weights themselves", () => {
  assert.deepEqual(Object.keys(norms), ["encoder_self", "decoder_self", "cross"]);  // ALTI+ has no norms reading
  for (const kind of Object.keys(norms)) {
    const C = payload.kinds[kind].cols.length, rows = norms[kind].length / C;
    for (let r = 0; r < rows; r++) {
      const sum = norms[kind].slice(r * C, (r + 1) * C).reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(sum - 1) < 1e-4, `${kind} row ${r} sums to ${sum}`);
    }
    assert.ok(norms[kind].some((v, i) => Math.abs(v - weights[kind][i]) > 1e-3), kind);
  }
});

test("weighted norms from the bytes stay within 0.02 of the full-precision computation", () => {
  for (const [kind, exact] of Object.entries(fixture.full_precision_norms)) {
    assert.equal(norms[kind].length, exact.length, kind);
    const worst = exact.reduce((m, v, i) => Math.max(m, Math.abs(v - norms[kind][i])), 0);
    assert.ok(worst < 0.02, `${kind}: largest difference ${worst}`);
  }
});

test("ALTI+: every prediction's contributions sum to 1 over the source and the decoder inputs", () => {
  const map = payload.kinds.alti, C = map.cols.length;
  for (let r = 0; r < weights.alti.length / C; r++) {
    const sum = weights.alti.slice(r * C, (r + 1) * C).reduce((a, b) => a + b, 0);
    assert.ok(Math.abs(sum - 1) < C / 255, `row ${r} sums to ${sum}`);  // bytes round each cell by up to 1/510
  }
  assert.equal(payload.source_share.length, payload.tgt.length);
});

test("some case merges pieces into fewer words", () => {
  assert.ok(fixture.cases.some(c => c.merge && c.cols.length < payload.kinds[c.kind].cols.length));
});

test("some case stops inside a word, so a word cut short is merged too", () => {
  const inside = c => c.step && c.merge && payload.kinds[c.kind].row_words.groups.some(g => g[0] < c.step && g[g.length - 1] >= c.step);
  assert.ok(fixture.cases.some(inside));
});

test("colours run from light (0) to dark (1) and clamp outside", () => {
  assert.equal(colour(0), "rgb(255, 250, 200)");
  assert.equal(colour(1), "rgb(30, 80, 160)");
  assert.equal(colour(2), colour(1));
  assert.equal(colour(-1), colour(0));
});
