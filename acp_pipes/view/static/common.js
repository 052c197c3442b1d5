
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
