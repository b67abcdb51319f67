// The page's Translate in the browser (explorer/static/translate_request.js): the route's URL under Gradio's root,
// and the event's outputs from the route's answers, an error leaving the result as it was. The body against
// Request.from_page is checked from Python (tests/test_page_translate.py). Run: node --test tests/js/
const test = require("node:test");
const assert = require("node:assert/strict");
const {requestBody, routeUrl, outcome, unchanged} = require("../../explorer/static/translate_request.js");

test("the route sits under Gradio's root, or beside the page where no root is known", () => {
  const at = (href) => new URL(href);
  assert.equal(routeUrl("http://127.0.0.1:7860", at("http://127.0.0.1:7860/")), "http://127.0.0.1:7860/api/v1/translate");
  assert.equal(routeUrl("https://host/app/", at("https://host/app/?text=x")), "https://host/app/api/v1/translate");
  assert.equal(routeUrl(null, at("https://host/app?text=x")), "https://host/app/api/v1/translate");
  assert.equal(routeUrl("", at("http://h:1/")), "http://h:1/api/v1/translate");
});

test("only the chosen strategy's settings go in the body, by their own names", () => {
  const names = [["text", null], ["strategy", null], ["beam_size", "beam"], ["temperature", "sample"],
                 ["seed", "sample"], ["heads_off", null]];
  assert.deepEqual(requestBody(names, ["A dog.", "sample", 4, 0.7, null, ""]),
                   {text: "A dog.", strategy: "sample", settings: {temperature: 0.7}, heads_off: ""});
  assert.deepEqual(requestBody(names, ["A dog.", "greedy", 4, 0.7, 1, ""]).settings, {});
});

test("an answer sets the outputs; an error sets only the alert, with the server's message as sent", () => {
  const answer = {translation: "Ein Hund.", summary: "**1 sentence(s)**", traces: [{src: ["x"]}, {src: ["y"]}],
                  result_key: "k1"};
  assert.deepEqual(outcome(200, answer), {ok: true, values: ["Ein Hund.", "**1 sentence(s)**", {src: ["x"]}, "k1", ""]});
  const refused = {error: {field: "text", message: "Source text has <b>2,001</b> characters"}};
  const {ok, values} = outcome(422, refused);
  assert.equal(ok, false);
  assert.deepEqual(values.slice(0, 4), unchanged().slice(0, 4));  // undefined: Gradio leaves the output as it is
  assert.equal(values[4], "Source text has <b>2,001</b> characters");  // shown as text by the alert box
  assert.match(outcome(502, null).values[4], /answered 502/);
  assert.match(outcome(200, {translation: "x"}).values[4], /answered 200/);  // not the route's answer
});
