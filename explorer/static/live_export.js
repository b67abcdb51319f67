// The live view's drawing as a file for a paper or a slide: the SVG with its text styled inline (the page's CSS does
// not travel with it), or a PNG of it at twice the size. Joined with live_render.js into one script (assets.py): it
// uses that file's `view`, `node` and SVG, and draw() there calls downloads(root).
function svgText(svg) {
  const clone = svg.cloneNode(true);
  clone.setAttribute("xmlns", SVG);
  const style = document.createElementNS(SVG, "style");
  style.textContent = "text { font: 11px sans-serif; fill: #1f2937; } .ae-focus { font-weight: 700; }";
  clone.insertBefore(style, clone.firstChild);
  return new XMLSerializer().serializeToString(clone);
}

function save(url, name) {
  const a = node("a", {href: url, download: name});
  document.body.appendChild(a);
  a.click();
  a.remove();
}

function downloads(root) {
  const svg = root.querySelector("svg.ae-heatmap, svg.ae-lines");
  if (!svg) return;
  const name = `attention-${view.kind}-${view.mode}` + (view.layer === "overview" ? "" : `-layer${shown(view.layer)}`) +
    (view.head === "mean" ? "-mean" : `-head${shown(view.head)}`) + (view.measure === "norms" ? "-norms" : "");
  const bar = node("div", {class: "ae-downloads"}, "Download: ");
  const asSvg = node("button", {type: "button", class: "ae-download", "data-format": "svg"}, "SVG");
  asSvg.addEventListener("click", () => save(URL.createObjectURL(new Blob([svgText(svg)], {type: "image/svg+xml"})), name + ".svg"));
  const asPng = node("button", {type: "button", class: "ae-download", "data-format": "png"}, "PNG");
  asPng.addEventListener("click", () => {
    const image = new Image(), width = Number(svg.getAttribute("width")), height = Number(svg.getAttribute("height"));
    image.onload = () => {
      const canvas = node("canvas", {width: 2 * width, height: 2 * height}), context = canvas.getContext("2d");
      context.fillStyle = "#ffffff";
      context.fillRect(0, 0, canvas.width, canvas.height);
      context.drawImage(image, 0, 0, canvas.width, canvas.height);
      save(canvas.toDataURL("image/png"), name + ".png");
    };
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svgText(svg));
  });
  bar.append(asSvg, " ", asPng);
  root.appendChild(bar);
}
