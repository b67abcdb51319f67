// The page's Translate, in the browser: the request controls' values become the body of the JSON route
// POST api/v1/translate (explorer/http_api.py), and its answer the values of the event's outputs, set here without
// Gradio's queue. explorer/page_translate.py wraps this file in the event's function and gives it `names`: per
// request control (Wiring.request_names), its name in the route's body and the strategy it is a setting of, or null.
// A bad request, a full server or a lost connection leaves every output as it was and says why in the alert box,
// as text; of two Translates, the one pressed last is shown, whichever answer comes first.

const ROUTE = "api/v1/translate";

// The route's body from the controls' values: only the chosen strategy's settings, by their own names (as
// Request.from_page reads the page).
function requestBody(names, values) {
  const strategy = values[names.findIndex(([name]) => name === "strategy")];
  const body = {settings: {}};
  names.forEach(([name, owner], i) => {
    if (owner === null) body[name] = values[i];
    else if (owner === strategy && values[i] !== null && values[i] !== undefined) body.settings[name] = values[i];
  });
  return body;
}

// Where the route is: beside the page, under Gradio's root (a page served under a path prefix has it there too).
function routeUrl(root, location) {
  const base = root ? String(root) : location.origin + location.pathname;
  return base.replace(/\/+$/, "") + "/" + ROUTE;
}

// The event's outputs (translation, summary, live view, result key, alert) from the route's answer: `undefined`
// leaves an output as it is (Gradio's frontend skips it). An error keeps the last good result and sets the alert.
function outcome(status, answer) {
  if (status === 200 && answer && Array.isArray(answer.traces) && typeof answer.result_key === "string") {
    return {ok: true, values: [answer.translation, answer.summary, answer.traces[0] ?? null, answer.result_key, ""]};
  }
  const message = answer && answer.error && typeof answer.error.message === "string" ? answer.error.message
    : `The server answered ${status} without a message; try again.`;
  return {ok: false, values: [undefined, undefined, undefined, undefined, message]};
}

function unchanged() { return [undefined, undefined, undefined, undefined, undefined]; }

// `shown`: the live view's payload now. An equal answer (the same request again) is not drawn again, so the live view
// is marked as drawing only when the answer's picture differs.
async function translatePage(names, values, shown) {
  const own = (globalThis.aeTranslateNumber = (globalThis.aeTranslateNumber || 0) + 1);
  const box = document.querySelector("#translation");
  if (box) box.classList.add("ae-busy");
  let result;
  try {
    const root = globalThis.gradio_config && globalThis.gradio_config.root;
    const response = await fetch(routeUrl(root, window.location), {
      method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(requestBody(names, values)),
    });
    let answer = null;
    try { answer = await response.json(); } catch (error) { answer = null; }
    result = outcome(response.status, answer);
  } catch (error) {  // no answer at all: the server is gone or the connection dropped
    result = {ok: false, values: [undefined, undefined, undefined, undefined,
      "Could not reach the server: check the connection and press Translate again."]};
  }
  if (own !== globalThis.aeTranslateNumber) return unchanged();  // a later Translate was pressed: its answer shows
  if (box) box.classList.remove("ae-busy");
  if (result.ok && JSON.stringify(result.values[2]) !== JSON.stringify(shown ?? null)) {
    // the live view inflates its new picture asynchronously and clears this once drawn; the result's adoption
    // (page_translate.py) waits for that, so the picture never waits for the server
    const live = document.querySelector("#live-attention .ae-live");
    if (live) live.dataset.pending = "1";
  }
  return result.values;
}

if (typeof module !== "undefined") module.exports = {requestBody, routeUrl, outcome, unchanged, ROUTE};
