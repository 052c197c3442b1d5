# ruff: noqa: E501 - the page's own script and style, kept as written for the browser
"""What both pages share: the style sheet and the script helpers that build the DOM.

The helpers are the only way the page scripts put recorded text on screen: ``el`` and
``txt`` make elements and text nodes (``textContent``), never markup, and nothing makes
a link or sets a URL from data. A recorded value never becomes a class name: ``known``
maps it to one of a fixed set of classes (a role ``"user tl-row"`` would restyle a card). Kept as Python strings so the package needs no data
files; the page hashes them into its Content-Security-Policy.
"""

CSS = r"""
:root{--fg:#1b1f24;--mute:#5f6b78;--line:#d6dbe1;--bg:#fff;--soft:#f4f6f8;--acc:#0b62c4;
--add:#e6f4ea;--addfg:#116329;--del:#fdecea;--delfg:#a1260d;--warn:#8a5300;--mark:#fff2a8;
--mono:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
*{box-sizing:border-box}
html,body{margin:0;height:100%}
body{font:14px/1.45 system-ui,"DejaVu Sans",Arial,sans-serif;color:var(--fg);background:var(--bg);
display:flex;flex-direction:column;overflow:hidden}
header.top{display:flex;align-items:center;gap:12px;padding:6px 12px;border-bottom:1px solid var(--line);
background:var(--soft);flex:none;flex-wrap:wrap}
header.top h1{font-size:15px;margin:0;font-weight:600;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis;max-width:40vw}
.tabs button{border:1px solid var(--line);background:var(--bg);padding:3px 12px;cursor:pointer;font:inherit}
.tabs button[aria-selected=true]{background:var(--acc);color:#fff;border-color:var(--acc)}
.tabs button:first-child{border-radius:4px 0 0 4px}.tabs button:last-child{border-radius:0 4px 4px 0}
.muted{color:var(--mute)}
.mono,pre,code{font-family:var(--mono);font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;padding:6px 8px;background:var(--soft);
border-radius:4px;max-height:420px;overflow:auto}
button.link{border:none;background:none;color:var(--acc);cursor:pointer;padding:0;font:inherit;
text-decoration:underline}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:12px;background:var(--soft);
border:1px solid var(--line);margin-left:4px;white-space:nowrap}
.b-completed,.b-applied,.b-answered,.b-resolved,.b-exited,.b-equal{background:var(--add);color:var(--addfg);border-color:#b7dfc2}
.b-failed,.b-cancelled,.b-declined,.b-error,.b-pending{background:var(--del);color:var(--delfg);border-color:#f3c4bd}
.b-in_progress,.b-running,.b-requires_action{background:#fff4e0;color:var(--warn);border-color:#f0d5a8}
mark{background:var(--mark);color:inherit;padding:0}
input[type=search],select{font:inherit;padding:2px 6px;border:1px solid var(--line);border-radius:4px;background:var(--bg)}
.notes{margin:0 0 8px;padding:6px 10px;border-left:3px solid var(--warn);background:#fff8ec;font-size:13px}
.notes li{margin:0}
.diff{background:var(--soft);border-radius:4px;padding:4px 0;margin:4px 0;font-family:var(--mono);
font-size:12.5px;max-height:420px;overflow:auto}
.diff div{white-space:pre-wrap;word-break:break-word;padding:0 8px}
.diff .add{background:var(--add);color:var(--addfg)}.diff .del{background:var(--del);color:var(--delfg)}
.diff .hunk{color:var(--acc)}.diff .meta{color:var(--mute)}
"""

#: Helpers every page script starts with (``D``: the page's data).
JS = r"""
'use strict';
const D = JSON.parse(document.getElementById('acp-data').textContent);
const PARTS = new Map();
function part(id) {  // a JSON part of the data, parsed the first time it is asked for
  if (!PARTS.has(id)) PARTS.set(id, JSON.parse(document.getElementById(id).textContent));
  return PARTS.get(id);
}
let QUERY = '';
function txt(s) {
  s = str(s);
  if (!QUERY) return document.createTextNode(s);
  const low = s.toLowerCase();
  let i = low.length === s.length ? low.indexOf(QUERY) : -1;
  if (i < 0) return document.createTextNode(s);
  const f = document.createDocumentFragment();
  let at = 0;
  while (i >= 0) {
    f.appendChild(document.createTextNode(s.slice(at, i)));
    const m = document.createElement('mark');
    m.textContent = s.slice(i, i + QUERY.length);
    f.appendChild(m);
    at = i + QUERY.length;
    i = low.indexOf(QUERY, at);
  }
  f.appendChild(document.createTextNode(s.slice(at)));
  return f;
}
function add(e, k) {
  if (k === null || k === undefined || k === false) return;
  if (typeof k === 'string' || typeof k === 'number') e.appendChild(txt(k));
  else if (Array.isArray(k)) for (const x of k) add(e, x);
  else e.appendChild(k);
}
function el(tag, cls, ...kids) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  for (const k of kids) add(e, k);
  return e;
}
function plain(tag, cls, text) {  // text never marked (labels, numbers)
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  e.textContent = text;
  return e;
}
function button(label, onclick, cls) {
  const b = document.createElement('button');
  b.type = 'button';
  b.className = cls || 'link';
  add(b, label);
  b.addEventListener('click', onclick);
  return b;
}
function str(v) {  // a recorded value as text: a string as is, an object or array as JSON (never "[object Object]")
  return v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v);
}
function known(value, names, other) {  // a class for a recorded value: one of names, else other
  return typeof value === 'string' && names.includes(value) ? value : other;
}
const BADGES = ['completed', 'applied', 'answered', 'resolved', 'exited', 'equal', 'failed', 'cancelled',
                'declined', 'error', 'pending', 'in_progress', 'running', 'requires_action'];
function badge(value) {  // a recorded value as a label; its colour from a fixed set of classes
  if (value === null || value === undefined) return null;
  const b = plain('span', 'badge', typeof value === 'string' ? value : JSON.stringify(value));
  const cls = known(value, BADGES, null);
  if (cls) b.classList.add('b-' + cls);
  return b;
}
function json(value) {
  return el('pre', 'json', JSON.stringify(value, null, 2));
}
function diffView(text) {
  const box = el('div', 'diff');
  for (const line of str(text).split('\n')) {
    let cls = '';
    if (line.startsWith('@@')) cls = 'hunk';
    else if (/^(diff |index |--- |\+\+\+ |new file|deleted file|rename |similarity )/.test(line)) cls = 'meta';
    else if (line.startsWith('+')) cls = 'add';
    else if (line.startsWith('-')) cls = 'del';
    box.appendChild(el('div', cls, line === '' ? '\u200b' : line));
  }
  return box;
}
function clip(s, n) {
  s = str(s).replace(/\s+/g, ' ').trim();
  return s.length > n ? s.slice(0, n - 1) + '\u2026' : s;
}
function fmtBytes(n) {
  return n < 1024 ? n + ' B' : n < 1048576 ? (n / 1024).toFixed(1) + ' KiB' : (n / 1048576).toFixed(1) + ' MiB';
}
function fmtNs(ns) {
  if (ns === null || ns === undefined) return '';
  const ms = ns / 1e6;
  return ms < 1 ? ms.toFixed(3) + ' ms' : ms < 1000 ? ms.toFixed(1) + ' ms' : (ms / 1000).toFixed(2) + ' s';
}
function isoNs(t0, dt) {  // epoch ns (t0 a decimal string, dt a number) -> RFC 3339
  if (t0 === null || dt === null || dt === undefined) return '';
  const ns = BigInt(t0) + BigInt(Math.round(dt));
  const s = ns / 1000000000n, frac = (ns % 1000000000n).toString().padStart(9, '0');
  const d = new Date(Number(s) * 1000);
  return isNaN(d) ? ns.toString() + ' ns' : d.toISOString().slice(0, 19) + '.' + frac + 'Z';
}
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
"""
