// Layers, heads and steps numbered for people: the browser's counterpart of transformer/core/head_ref.py. The code
// counts from 0; what a person reads, or finds in a link, counts from 1, and only these two functions convert.
function shown(index) { return index + 1; }
function fromShown(number) { return number - 1; }

if (typeof module !== "undefined") module.exports = {shown, fromShown};
