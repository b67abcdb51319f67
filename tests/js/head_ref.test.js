// The browser's numbering for people (explorer/static/head_ref.js) against head_ref.py's rule: index 0 reads 1,
// and reading back gives the index. Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const {shown, fromShown} = require("../../explorer/static/head_ref.js");

test("layers, heads and steps read from 1 and parse back to the index", () => {
  assert.deepEqual([0, 1, 11].map(shown), [1, 2, 12]);
  for (const index of [0, 3, 255]) assert.equal(fromShown(shown(index)), index);
  assert.equal(fromShown(1), 0);
});
