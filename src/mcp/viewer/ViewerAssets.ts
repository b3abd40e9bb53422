/**
 * The viewer's stylesheet and its one script, served from the viewer's own path (the
 * pages' Content-Security-Policy allows no other script or style). The script keeps a
 * session page live from its event stream (text appended as text; cells and rich
 * outputs arrive as HTML the server escaped), refreshes the session list, and ticks the
 * running timers.
 */

/** The stylesheet. */
export const VIEWER_CSS = `
:root { color-scheme: light dark; --bg: #f6f7f9; --card: #fff; --ink: #1c2024; --muted: #68707a; --line: #dde1e6;
  --code: #f1f3f5; --err: #b42318; --errbg: #fdf1f0; --warn: #8a5a00; --ok: #1a7f37; --run: #0b62d6; }
@media (prefers-color-scheme: dark) { :root { --bg: #15171a; --card: #1d2024; --ink: #e6e8eb; --muted: #9aa3ad; --line: #30353b;
  --code: #24282d; --err: #ff8a80; --errbg: #2e1c1c; --warn: #e3b341; --ok: #56d364; --run: #58a6ff; } }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
a { color: var(--run); }
header.top { position: sticky; top: 0; z-index: 1; display: flex; flex-wrap: wrap; align-items: baseline; gap: .4rem 1rem; padding: .8rem 1.2rem; background: var(--card); border-bottom: 1px solid var(--line); }
header.top h1 { font-size: 1.15rem; margin: 0; }
header.top .export { margin-left: auto; }
main { max-width: 1100px; margin: 0 auto; padding: 1rem 1.2rem 3rem; }
main > h1 { font-size: 1.3rem; }
.muted { color: var(--muted); }
.id { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; color: var(--muted); overflow-wrap: anywhere; }
table.sessions { width: 100%; border-collapse: collapse; background: var(--card); border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
table.sessions th, table.sessions td { text-align: left; padding: .55rem .75rem; border-bottom: 1px solid var(--line); vertical-align: top; }
table.sessions th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); }
table.sessions tr:last-child td { border-bottom: 0; }
.cell { background: var(--card); border: 1px solid var(--line); border-left: 4px solid var(--line); border-radius: 8px; margin: 0 0 1rem; overflow: hidden; }
.cell.state-running { border-left-color: var(--run); }
.cell.state-ok { border-left-color: var(--ok); }
.cell.state-error, .cell.state-failed, .cell.state-killed { border-left-color: var(--err); }
.cell.state-cancelled, .cell.state-interrupted, .cell.state-timed-out { border-left-color: var(--warn); }
.cell > header { display: flex; flex-wrap: wrap; align-items: center; gap: .3rem .7rem; padding: .45rem .8rem; font-size: .85rem; border-bottom: 1px solid var(--line); }
.cell .n { font-weight: 600; }
.cell .lang { font: 12px ui-monospace, monospace; background: var(--code); padding: 0 .35rem; border-radius: 4px; }
.cell .title { font-weight: 500; }
.cell .state { color: var(--muted); }
.state-running .state { color: var(--run); font-weight: 600; }
.state-error .state, .state-failed .state, .state-killed .state { color: var(--err); }
.cell .timing { color: var(--muted); font-variant-numeric: tabular-nums; }
.cell form.interrupt { margin-left: auto; }
.cell form.interrupt button { font: inherit; color: #fff; background: var(--err); border: 0; border-radius: 6px; padding: .25rem .8rem; cursor: pointer; }
pre { margin: 0; padding: .55rem .8rem; font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.code { background: var(--code); }
.outputs pre.stderr { background: var(--errbg); }
.outputs .rich { padding: .4rem .8rem; }
.outputs .error pre { color: var(--err); background: var(--errbg); }
img.figure { display: block; max-width: 100%; height: auto; background: #fff; border-radius: 4px; }
iframe.html { display: block; width: 100%; border: 1px solid var(--line); border-radius: 4px; background: #fff; resize: vertical; }
.notice { margin: 0; padding: .5rem .8rem; color: var(--warn); border-top: 1px solid var(--line); font-size: .9rem; }
#live { font-size: .85rem; }
@media (max-width: 640px) {
  body { font-size: 14px; }
  main { padding: .7rem .6rem 2rem; }
  header.top { padding: .6rem .7rem; }
  header.top .id { display: none; }
  table.sessions thead { display: none; }
  table.sessions, table.sessions tbody, table.sessions tr, table.sessions td { display: block; width: 100%; }
  table.sessions tr { border-bottom: 1px solid var(--line); padding: .4rem 0; }
  table.sessions td { border: 0; padding: .1rem .75rem; }
  pre { font-size: 12px; padding: .45rem .6rem; }
}
`

/** The stylesheet of a sandboxed HTML output (its own inline styles are refused by the page's policy, which it inherits). */
export const FRAME_CSS = `
:root { color-scheme: light; }
body { margin: 6px; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1c2024; background: #fff; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 10px; text-align: right; border: 0; border-bottom: 1px solid #e4e7eb; }
thead th { border-bottom: 1px solid #9aa3ad; }
tbody tr:nth-child(odd) { background: #f6f7f9; }
tbody th { font-weight: 600; }
pre, code { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; }
img, svg { max-width: 100%; height: auto; }
`

/** The script. */
export const VIEWER_JS = `"use strict";
(function () {
  var body = document.body;
  var offset = Date.now() - Number(body.getAttribute("data-now") || Date.now());
  function format(ms) {
    if (ms < 1000) return Math.max(0, Math.round(ms)) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    var s = Math.floor(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
    return Math.floor(s / 3600) + " h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + " min";
  }
  function tick() {
    var now = Date.now() - offset;
    document.querySelectorAll(".elapsed[data-started]").forEach(function (el) {
      el.textContent = format(now - Number(el.getAttribute("data-started")));
    });
  }
  setInterval(tick, 500);

  var list = document.getElementById("sessions");
  if (list) {
    setInterval(function () {
      fetch(list.getAttribute("data-refresh"), { credentials: "same-origin", cache: "no-store" }).then(function (response) {
        if (!response.ok) throw new Error("the server answered " + response.status);
        return response.text();
      }).then(function (html) { list.innerHTML = html; }, function () {});
    }, 2000);
  }

  var events = body.getAttribute("data-events");
  if (!events) return;
  var cells = document.getElementById("cells");
  var live = document.getElementById("live");
  function nearBottom() { return window.innerHeight + window.scrollY >= document.body.scrollHeight - 80; }
  function follow(stick) { if (stick) window.scrollTo(0, document.body.scrollHeight); }
  function fragment(html) { var t = document.createElement("template"); t.innerHTML = html; return t.content; }
  function putCell(n, html) {
    var stick = nearBottom();
    var old = document.getElementById("cell-" + n);
    var node = fragment(html);
    if (old) old.replaceWith(node);
    else {
      var empty = cells.querySelector(".empty");
      if (empty) empty.remove();
      cells.appendChild(node);
    }
    tick();
    follow(stick);
  }
  var source = new EventSource(events);
  source.onopen = function () { live.textContent = "live"; };
  source.onerror = function () { live.textContent = "reconnecting…"; };
  source.addEventListener("index", function (e) {
    var d = JSON.parse(e.data);
    var stale = cells.querySelectorAll(".cell").length !== d.length || d.some(function (c) {
      var el = document.getElementById("cell-" + c.n);
      return !el || el.getAttribute("data-state") !== c.state;
    });
    if (stale) location.reload();
  });
  source.addEventListener("cell", function (e) { var d = JSON.parse(e.data); putCell(d.n, d.html); });
  source.addEventListener("text", function (e) {
    var d = JSON.parse(e.data);
    var outputs = document.querySelector("#cell-" + d.n + " .outputs");
    if (!outputs) return;
    var stick = nearBottom();
    var last = outputs.lastElementChild;
    if (!last || last.tagName !== "PRE" || !last.classList.contains(d.stream)) {
      last = document.createElement("pre");
      last.className = d.stream;
      outputs.appendChild(last);
    }
    last.textContent += d.text;
    follow(stick);
  });
  source.addEventListener("output", function (e) {
    var d = JSON.parse(e.data);
    var outputs = document.querySelector("#cell-" + d.n + " .outputs");
    if (outputs) { var stick = nearBottom(); outputs.appendChild(fragment(d.html)); follow(stick); }
  });
  source.addEventListener("ended", function () {
    live.textContent = "This session has ended.";
    source.close();
    document.querySelectorAll("form.interrupt").forEach(function (form) { form.remove(); });
  });
})();
`
