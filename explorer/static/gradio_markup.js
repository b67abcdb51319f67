// Repairs to Gradio's own markup that axe-core or the accessibility tree flags under WCAG 2.1 AA
// (docs/accessibility.md names each, with the Gradio version, so it can be reported upstream). Gradio redraws
// components at any time, so an observer repairs the page again whenever nodes are added.
(() => {
  let labels = 0;
  // A radio or checkbox group is a `<fieldset>` with no `<legend>`: its visible label is a `<span
  // data-testid="block-info">` inside it, which names nothing, so a screen reader announces the options without
  // saying what is chosen (WCAG 1.3.1, 4.1.2). The label the reader sees becomes the group's name.
  const nameGroup = (group) => {
    const label = group.querySelector("[data-testid=block-info]");
    if (!label || !label.textContent.trim()) return;
    if (!label.id) label.id = `ae-group-label-${++labels}`;
    group.setAttribute("aria-labelledby", label.id);
  };
  // An icon button named only by its `title` (the multiselect's "remove" on each chosen item, Gradio's clear and
  // full-screen buttons): a title is a tooltip, not every reader announces it as the name. It becomes the label.
  const nameButton = (button) => {
    if (button.textContent.trim()) return;
    const title = button.getAttribute("title");
    if (title) button.setAttribute("aria-label", title);
  };
  const repair = () => {
    // An empty plot, file or image shows a placeholder `<div class="empty" aria-label="Empty value">`: an
    // aria-label on a div with no role is not announced (axe: aria-prohibited-attr). As an image it is.
    for (const node of document.querySelectorAll(".empty[aria-label]:not([role])")) node.setAttribute("role", "img");
    for (const group of document.querySelectorAll("fieldset:not([aria-labelledby]):not([aria-label])")) {
      nameGroup(group);
    }
    const buttons = "button[title]:not([aria-label]):not([aria-labelledby]), " +
      "[role=button][title]:not([aria-label]):not([aria-labelledby])";
    for (const button of document.querySelectorAll(buttons)) nameButton(button);
  };
  const start = () => {
    repair();
    // one pass over the page per batch of changes (a few selector queries, well under a millisecond)
    new MutationObserver(repair).observe(document.body, { childList: true, subtree: true });
  };
  if (document.body) start(); else document.addEventListener("DOMContentLoaded", start);
})();
