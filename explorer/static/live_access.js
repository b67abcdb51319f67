// The live picture for a keyboard and a screen reader (WCAG 2.1 AA 1.1.1, 2.1.1, 4.1.3): the heatmap's cells and the
// lines' tokens reached by the arrow keys, what they reach announced in a live region, and each map's numbers as a
// table. Part of the live view's script (assets.py's LIVE_JS): `element`, `view`, `node`, `draw` and `shown` come
// from live_render.js and head_ref.js, `attendsText` from live_data.js.

// The arrow keys move a cursor over the map's cells (Home/End: first and last key); each move announces the cell and
// what its query attends to most
function keyCursor(svg, tip, m, rows, cols, {left, top, cell}) {
  const ring = node("rect", {class: "ae-cursor", width: cell - 1, height: cell - 1, fill: "none", visibility: "hidden"},
                    null, true);
  svg.appendChild(ring);
  const at = {row: 0, col: 0};
  const moves = {ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1]};
  svg.addEventListener("keydown", event => {
    if (event.key === "Home") at.col = 0;
    else if (event.key === "End") at.col = cols.length - 1;
    else if (moves[event.key]) {
      at.row = Math.max(0, Math.min(rows.length - 1, at.row + moves[event.key][0]));
      at.col = Math.max(0, Math.min(cols.length - 1, at.col + moves[event.key][1]));
    } else return;
    event.preventDefault();
    ring.setAttribute("x", left + at.col * cell);
    ring.setAttribute("y", top + at.row * cell);
    ring.setAttribute("visibility", "visible");
    svg.dataset.cursor = `${at.row},${at.col}`;
    tip.textContent = `query ${rows[at.row]} → key ${cols[at.col]}: ${m[at.row][at.col].toFixed(3)}. ` +
      attendsText(m, rows, cols, at.row) + ".";
  });
}

// The map's numbers as a table under it, built when opened: a header per key, a row header per query
function dataTable(title, m, rows, cols) {
  // a <details> is a group in the accessibility tree, which its summary does not name once it is open
  const details = node("details", {class: "ae-data", "aria-label": "Data: the numbers of this map"});
  details.appendChild(node("summary", {}, `Data: the numbers of this map`));
  details.addEventListener("toggle", () => {
    if (!details.open || details.querySelector("table")) return;
    const table = node("table", {class: "ae-data-table"});
    table.appendChild(node("caption", {}, title));
    const head = node("tr"), rowsBody = node("tbody");
    head.appendChild(node("td"));
    cols.forEach(c => head.appendChild(node("th", {scope: "col"}, c)));
    table.appendChild(node("thead")).appendChild(head);
    m.forEach((row, i) => {
      const tr = node("tr");
      tr.appendChild(node("th", {scope: "row"}, rows[i]));
      row.forEach(w => tr.appendChild(node("td", {}, w.toFixed(3))));
      rowsBody.appendChild(tr);
    });
    table.appendChild(rowsBody);
    const body = node("div", {class: "ae-data-body", tabindex: "0"});
    body.appendChild(table);
    details.appendChild(body);
  });
  return details;
}

// The lines' keyboard: Up and Down move over one side's tokens, Left and Right change side (keys left, queries
// right); the followed token's lines stay, and what it attends to (or is attended by) is announced, head by head
function linesKeys(svg, per, rows, cols) {
  svg.addEventListener("keydown", event => {
    const focus = view.focus || {side: "query", index: -1};
    let {side, index} = focus;
    if (event.key === "ArrowLeft") side = "key";
    else if (event.key === "ArrowRight") side = "query";
    else if (event.key === "ArrowUp") index -= 1;
    else if (event.key === "ArrowDown") index += 1;
    else return;
    event.preventDefault();
    const last = (side === "query" ? rows : cols).length - 1;
    index = Math.max(0, Math.min(last, side === focus.side ? index : Math.min(focus.index, last)));
    view.focus = {side, index};
    const heads = per.map((_, h) => h).filter(h => !view.headsOff.has(h));
    announce(side === "query"
      ? `query ${rows[index]}: ` + heads.map(h => `head ${shown(h)}, ` + attendsText(per[h].m, rows, cols, index)).join("; ")
      : `key ${cols[index]}: ` + heads.map(h => {
          const column = per[h].m.map(row => row[index]), i = column.indexOf(Math.max(...column));
          return `head ${shown(h)}, most from '${rows[i]}' (${column[i].toFixed(2)})`;
        }).join("; "));
    draw();
    const again = element.querySelector(".ae-lines");
    if (again) again.focus();
  });
}

// a live region beside the picture, kept across redraws, so a screen reader hears what the keys reached
function announce(text) {
  let region = element.querySelector(".ae-announce");
  if (!region) {
    region = node("div", {class: "ae-announce", role: "status", "aria-live": "polite"});
    element.appendChild(region);
  }
  region.textContent = text;
}

