// The live picture's words for a screen reader (explorer/static/live_data.js: strongestCell, attendsText, mapName)
// against a search by hand over a small map. Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const {strongestCell, attendsText, mapName} = require("../../explorer/static/live_data.js");

const m = [[0.1, 0.6, 0.3], [0.7, 0.2, 0.1]];
const rows = ["Ein", "Hund"], cols = ["A", "dog", "</s>"];

test("the strongest cell is the largest weight's row and column", () => {
  let best = [0, 0];
  for (let i = 0; i < m.length; i++) for (let j = 0; j < m[i].length; j++) if (m[i][j] > m[best[0]][best[1]]) best = [i, j];
  assert.deepEqual(strongestCell(m), {row: best[0], col: best[1], weight: m[best[0]][best[1]]});
  assert.equal(mapName("Cross-attention", m, rows, cols), "Cross-attention: 'Hund' attends most to 'A' (0.70)");
});

test("a row's words name its two largest weights, in order", () => {
  assert.equal(attendsText(m, rows, cols, 0), "'Ein' attends most to 'dog' (0.60), then '</s>' (0.30)");
  assert.equal(attendsText([[1, 0]], ["x"], ["a", "b"], 0), "'x' attends most to 'a' (1.00)");
});
