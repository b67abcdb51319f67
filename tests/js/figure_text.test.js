// A figure's text alternative (explorer/static/figure_text.js) against the numbers given to it: the name names
// the strongest cell found by a separate search, and the table holds every value under its row and column.
// Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const {figureName, figureTables, number} = require("../../explorer/static/figure_text.js");

const z = [[0.1, 0.7, 0.2], [0.05, 0.15, 0.8]];
const attention = {
  type: "heatmap", z: z.map((row) => Float32Array.from(row)), x: ["▁A\u200b", "▁dog", "&lt;/s&gt;"],
  y: ["▁Ein", "▁Hund"], hovertemplate: "query %{y}<br>key %{x}<br>weight %{z:.3f}<extra></extra>",
  xaxis: "x", yaxis: "y",
};
const layout = {title: {text: "Cross-attention,<br>layer 2, head 3"}, xaxis: {}, yaxis: {}};

function strongestByHand(rows) {
  let best = [0, 0];
  rows.forEach((row, i) => row.forEach((v, j) => { if (v > rows[best[0]][best[1]]) best = [i, j]; }));
  return best;
}

test("an attention map's name says which query attends most to which key, with the weight", () => {
  const [i, j] = strongestByHand(z);
  const name = figureName([attention], layout);
  const queries = ["▁Ein", "▁Hund"], keys = ["▁A", "▁dog", "</s>"];  // without the marks, unescaped
  assert.equal(name, `Cross-attention, layer 2, head 3: '${queries[i]}' attends most to '${keys[j]}' (${z[i][j]})`);
});

test("the data table has a header per key, a row header per query and every weight", () => {
  const html = figureTables([attention], layout);
  const headers = [...html.matchAll(/<th scope="col">([^<]*)<\/th>/g)].map((m) => m[1]);
  assert.deepEqual(headers, ["▁A", "▁dog", "&lt;/s&gt;"]);  // the marks gone, the text escaped once
  const rows = [...html.matchAll(/<tr><th scope="row">([^<]*)<\/th>(.*?)<\/tr>/g)];
  assert.deepEqual(rows.map((m) => m[1]), ["▁Ein", "▁Hund"]);
  rows.forEach((m, r) => {
    const cells = [...m[2].matchAll(/<td>([^<]*)<\/td>/g)].map((c) => Number(c[1]));
    cells.forEach((value, c) => assert.ok(Math.abs(value - z[r][c]) < 5e-4, `${r},${c}: ${value}`));
  });
  assert.match(html, /<caption>Cross-attention, layer 2, head 3<\/caption>/);
});

test("bars are named by their custom labels, lines by their series, and missing values stay missing", () => {
  const bars = {type: "bar", orientation: "h", x: [0.9, 0.05, NaN], y: [0, 1, 2], customdata: ["▁Wo", "▁Was", "▁X"],
    xaxis: "x", yaxis: "y"};
  assert.equal(figureName([bars], {title: {text: "Candidates"}}), "Candidates: highest 0.9 at ▁Wo");
  assert.match(figureTables([bars], {title: {text: "Candidates"}}), /<th scope="row">▁X<\/th><td>–<\/td>/);
  const loss = {type: "scatter", name: "loss", x: [1, 2, 3], y: [3, 1, 2], xaxis: "x", yaxis: "y"};
  const ticks = {title: {text: "Curves"}, xaxis: {tickvals: [1, 2, 3], ticktext: ["one", "two", "three"]}};
  assert.equal(figureName([loss], ticks), "Curves: loss: highest 3 at one");
  assert.equal(number(0.123456), "0.123");
  assert.equal(number(12345.6), "12346");
});
