// A text alternative for every plotly figure on the page (WCAG 2.1 AA 1.1.1): an accessible name that says what
// the figure shows and its strongest value, and a "Data" disclosure holding the figure's numbers as an HTML table
// with real headers. Both are read from the figure as plotly draws it (`gd._fullData`), so they cannot drift from
// the picture. The pure functions come first (tested under node: tests/js/figure_text.test.js); the page part
// below them finds each figure and keeps its text current as Gradio redraws it.
(function (root) {
  const MARKS = /[\u200b-\u200d]/g; // the invisible marks that keep repeated tokens apart on a category axis

  const ENTITIES = { amp: "&", lt: "<", gt: ">", quot: '"', "#39": "'", "#x27": "'" };
  // plotly's labels are HTML (the server escapes tokens for it): their text, as a reader hears it
  const plain = (text) => String(text ?? "").replace(/<br\s*\/?>/gi, " ").replace(/<[^>]*>/g, "")
    .replace(/&(amp|lt|gt|quot|#39|#x27);/g, (_, name) => ENTITIES[name])
    .replace(MARKS, "").replace(/\s+/g, " ").trim();
  const unnamed = (name) => !name || /^trace \d+$/.test(name); // plotly's own name for a trace given none

  const escaped = (text) => String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");

  // three significant digits below 1000, whole numbers above: the precision the hover texts show
  const number = (value) => {
    const v = Number(value);
    if (value === null || value === undefined || !Number.isFinite(v)) return "–";
    return Math.abs(v) >= 1000 ? v.toFixed(0) : String(Number(v.toPrecision(3)));
  };

  const titleOf = (layout) => plain(layout && layout.title && (layout.title.text ?? layout.title)) || "Figure";

  // a category's label: the axis's tick text where the trace draws numbers at ticks, else the value itself
  const labeller = (axis) => {
    const values = axis && axis.tickvals, texts = axis && axis.ticktext;
    if (!values || !texts) return (value) => plain(value);
    const byValue = new Map(Array.from(values, (v, i) => [String(v), texts[i]]));
    return (value) => plain(byValue.has(String(value)) ? byValue.get(String(value)) : value);
  };

  const axisOf = (layout, trace, letter) => {
    const id = trace[letter + "axis"] || letter;
    return layout && layout[letter + "axis" + id.slice(1)];
  };

  // one heatmap as rows (y) x columns (x): labels and values
  function heatmapTable(trace, layout) {
    const xLabel = labeller(axisOf(layout, trace, "x")), yLabel = labeller(axisOf(layout, trace, "y"));
    const rows = Array.from(trace.z || [], (row) => Array.from(row || []));
    const width = Math.max(0, ...rows.map((row) => row.length));
    const columns = Array.from({ length: width }, (_, j) => xLabel(trace.x ? trace.x[j] : j));
    const rowLabels = rows.map((_, i) => yLabel(trace.y ? trace.y[i] : i));
    return { columns, rows: rows.map((values, i) => ({ label: rowLabels[i], values })) };
  }

  // bars and lines: one row per point, its category (the custom label where the trace carries one) and value
  function seriesTable(trace, layout) {
    const horizontal = trace.type === "bar" && trace.orientation === "h";
    const [category, amount] = horizontal ? ["y", "x"] : ["x", "y"];
    const label = labeller(axisOf(layout, trace, category));
    const values = Array.from(trace[amount] || []);
    const points = values.map((value, i) => {
      const custom = trace.customdata && trace.customdata[i];
      const name = typeof custom === "string" ? plain(custom) : label(trace[category] ? trace[category][i] : i);
      return { label: name, values: [value] };
    });
    return { columns: [unnamed(plain(trace.name)) ? "value" : plain(trace.name)], rows: points };
  }

  function tableOf(trace, layout) {
    return trace.type === "heatmap" ? heatmapTable(trace, layout) : seriesTable(trace, layout);
  }

  function strongest(table) {
    let best = null;
    table.rows.forEach((row) => row.values.forEach((value, j) => {
      const v = Number(value);
      if (value !== null && Number.isFinite(v) && (best === null || v > best.value)) {
        best = { value: v, row: row.label, column: table.columns[j] };
      }
    }));
    return best;
  }

  const traceUsable = (trace) => trace.visible !== false && trace.visible !== "legendonly" &&
    (trace.type === "heatmap" || trace.type === "bar" || trace.type === "scatter");

  // "Cross-attention, layer 4: 'Bahnhof' attends most to 'station' (0.82)", or the strongest cell of any figure
  function figureName(data, layout) {
    const title = titleOf(layout);
    const traces = (data || []).filter(traceUsable);
    if (!traces.length) return title;
    const parts = traces.slice(0, 3).map((trace) => {
      const best = strongest(tableOf(trace, layout));
      if (!best) return null;
      const template = String(trace.hovertemplate || "");
      if (trace.type === "heatmap" && /query/.test(template) && /key/.test(template)) {
        return `'${best.row}' attends most to '${best.column}' (${number(best.value)})`;
      }
      if (trace.type === "heatmap") return `highest ${number(best.value)} at ${best.row}, ${best.column}`;
      const series = unnamed(plain(trace.name)) ? "" : plain(trace.name) + ": ";
      return `${series}highest ${number(best.value)} at ${best.row}`;
    }).filter(Boolean);
    const more = traces.length > 3 ? `; ${traces.length - 3} more series in the data table` : "";
    return parts.length ? `${title}: ${parts.join("; ")}${more}` : title;
  }

  function tableHtml(table, caption) {
    const head = `<tr><td></td>${table.columns.map((c) => `<th scope="col">${escaped(c)}</th>`).join("")}</tr>`;
    const body = table.rows.map((row) => `<tr><th scope="row">${escaped(row.label)}</th>` +
      row.values.map((v) => `<td>${number(v)}</td>`).join("") + "</tr>").join("");
    return `<table class="ae-data-table"><caption>${escaped(caption)}</caption><thead>${head}</thead>` +
      `<tbody>${body}</tbody></table>`;
  }

  // every usable trace's table, captioned by the figure's title and the trace's name where it has one
  function figureTables(data, layout) {
    const title = titleOf(layout);
    return (data || []).filter(traceUsable).map((trace, i, all) => {
      const name = plain(trace.name);
      const caption = all.length > 1 && !unnamed(name) ? `${title}: ${name}` :
        all.length > 1 ? `${title}, part ${i + 1}` : title;
      return tableHtml(tableOf(trace, layout), caption);
    }).join("");
  }

  const api = { figureName, figureTables, tableOf, plain, number };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  root.aeFigureText = api;

  if (typeof document === "undefined") return;

  // the page: each plotly figure is a named figure (role="figure": plotly's drag layers inside stay reachable, which an
  // image's presentational children would hide), followed by a Data disclosure whose table is built when opened
  // (a 256 x 256 map is 65,536 cells: built on every redraw, it would slow the page) and rebuilt on each redraw
  // while open. A figure is redone when plotly has replaced its data or layout (it does on every redraw).
  function fill(gd, details) {
    details.querySelector(".ae-data-body").innerHTML = figureTables(gd._fullData, gd._fullLayout);
  }

  function describe(gd) {
    if (!gd._fullData || !gd._fullLayout) return;
    let details = gd.nextElementSibling;
    if (details && details.classList.contains("ae-data") && gd.__aeData === gd._fullData &&
        gd.__aeLayout === gd._fullLayout) return;
    gd.__aeData = gd._fullData;
    gd.__aeLayout = gd._fullLayout;
    if (!details || !details.classList.contains("ae-data")) {
      details = document.createElement("details");
      details.className = "ae-data";
      details.innerHTML = "<summary>Data</summary><div class=\"ae-data-body\" tabindex=\"0\"></div>";
      details.addEventListener("toggle", () => { if (details.open) fill(gd, details); });
      gd.after(details);
    }
    gd.setAttribute("role", "figure");
    gd.setAttribute("aria-label", figureName(gd._fullData, gd._fullLayout));
    details.querySelector("summary").textContent = `Data: the numbers of "${titleOf(gd._fullLayout)}"`;
    // a <details> is a group in the accessibility tree, which its summary does not name once it is open
    details.setAttribute("aria-label", details.querySelector("summary").textContent);
    if (details.open) fill(gd, details);
  }

  let pending = null;
  const scan = () => {
    pending = null;
    document.querySelectorAll(".js-plotly-plot").forEach(describe);
  };
  const start = () => {
    new MutationObserver(() => { if (!pending) pending = setTimeout(scan, 120); })
      .observe(document.body, { childList: true, subtree: true });
  };
  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})(typeof window !== "undefined" ? window : globalThis);
