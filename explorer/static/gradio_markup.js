// Repairs to Gradio's own markup that axe-core flags under WCAG 2.1 AA (docs/accessibility.md names each, with
// the Gradio version, so it can be reported upstream). Gradio redraws components at any time, so an observer
// repairs each new node as it appears.
(() => {
  // An empty plot, file or image shows a placeholder `<div class="empty" aria-label="Empty value">`: an
  // aria-label on a div with no role is not announced (axe: aria-prohibited-attr). As an image it is.
  const repair = (root) => {
    for (const node of root.querySelectorAll(".empty[aria-label]:not([role])")) node.setAttribute("role", "img");
  };
  const start = () => {
    repair(document);
    new MutationObserver((changes) => {
      for (const change of changes) {
        for (const node of change.addedNodes) if (node.nodeType === 1) repair(node.parentNode || node);
      }
    }).observe(document.body, { childList: true, subtree: true });
  };
  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})();
