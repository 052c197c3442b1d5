
const S = D.strings, NF = D.nframes;
let F = null;  // the frames, parsed when first needed (the timeline, a frame link)
function frames() { if (F === null) F = part('acp-frames'); return F; }
function itemsOf(s) { return part(s.part); }
const KINDS = ['request', 'response', 'error', 'notification', 'invalid_json', 'not_jsonrpc'];
const ARROW = ['→', '←'];
const sessions = D.sessions;
const byId = new Map(sessions.map((s, i) => [s.id, i]));
let current = 0;
const PAGE = 300;

// ---- top bar and session list ----------------------------------------------------
function title() {
  const names = D.inputs.map(i => i.name).join(', ');
  document.title = 'acp-view: ' + names;
  document.getElementById('title').textContent = names || 'acp-view';
  const parts = [sessions.length + (sessions.length === 1 ? ' session' : ' sessions'),
                 NF + (NF === 1 ? ' frame' : ' frames')];
  if (D.validated) {
    const n = D.nviolations;
    parts.push(n ? n + (n === 1 ? ' spec violation' : ' spec violations') : 'no spec violation');
  }
  document.getElementById('summary').textContent = parts.join(' · ');
}
function firstPrompt(s) { return s.first || ''; }
function textOf(blocks) {
  if (!Array.isArray(blocks)) return typeof blocks === 'string' ? blocks : '';
  return blocks.map(b => b && typeof b.text === 'string' ? b.text : '').join('');
}
const MAX_INDENT = 16;  // levels of the session tree shown by indentation
function sessionList() {
  const nav = document.getElementById('sessions');
  clear(nav);
  add(nav, plain('h2', '', 'Sessions'));
  if (!sessions.length) add(nav, plain('p', 'muted', '  none'));
  const depth = new Map();
  const order = [];
  const visit = (root, d0) => {  // depth first, children in order; a stack, not recursion:
    const todo = [[root, d0]];      // a chain of 10,000 forks is 10,000 deep
    while (todo.length) {
      const [i, d] = todo.pop();
      if (depth.has(i)) continue;
      depth.set(i, d);
      order.push(i);
      const kids = sessions[i].links.children;
      for (let k = kids.length - 1; k >= 0; k--) if (byId.has(kids[k].session)) todo.push([byId.get(kids[k].session), d + 1]);
    }
  };
  sessions.forEach((s, i) => { if (!s.links.parents.some(p => byId.has(p.session))) visit(i, 0); });
  sessions.forEach((s, i) => visit(i, 0));
  for (const i of order) {
    const s = sessions[i];
    const b = button([plain('span', 'sid', s.id), plain('span', 'first', firstPrompt(s))], () => showSession(i), ' ');
    const d = depth.get(i);
    b.style.paddingLeft = (10 + 14 * Math.min(d, MAX_INDENT)) + 'px';
    b.dataset.session = str(i);
    b.title = d > MAX_INDENT ? s.id + ' (depth ' + d + ')' : s.id;
    add(nav, b);
  }
}
function markCurrent() {
  for (const b of document.querySelectorAll('#sessions button'))
    b.setAttribute('aria-current', b.dataset.session === str(current) ? 'true' : 'false');
}
function sessionButton(sid, label) {
  if (!byId.has(sid)) return plain('span', 'mono', (label ? label + ' ' : '') + sid + ' (not in this page)');
  return button((label ? label + ' ' : '') + sid, () => showSession(byId.get(sid)));
}

// ---- tabs ------------------------------------------------------------------------
function showTab(name) {
  for (const t of ['transcript', 'timeline']) {
    document.getElementById(t).hidden = t !== name;
    document.getElementById('tab-' + t).setAttribute('aria-selected', t === name ? 'true' : 'false');
  }
  document.body.classList.toggle('tl', name === 'timeline');
  if (name === 'timeline') timeline.show();
}
function showSession(i) {
  current = i;
  markCurrent();
  showTab('transcript');
  renderTranscript();
}

// ---- transcript ------------------------------------------------------------------
let shown = [], drawn = 0, observer = null;
const itemText = new Map();
function textsOf(v, out) {  // every string in v, in order (a stack: values nest deep)
  const todo = [v];
  while (todo.length) {
    const x = todo.pop();
    if (typeof x === 'string') out.push(x);
    else if (Array.isArray(x)) for (let k = x.length - 1; k >= 0; k--) todo.push(x[k]);
    else if (x && typeof x === 'object') { const ks = Object.keys(x); for (let k = ks.length - 1; k >= 0; k--) if (ks[k] !== 'native') todo.push(x[ks[k]]); }
  }
  return out;
}
function searchable(it) {
  let t = itemText.get(it);
  if (t === undefined) { t = textsOf(it, []).join('\n').toLowerCase(); itemText.set(it, t); }
  return t;
}
function renderTranscript() {
  const s = sessions[current];
  const body = document.getElementById('t-body');
  clear(body);
  if (!s) {
    add(body, notes());
    add(body, plain('p', 'muted', 'No transcript: this input holds no session that could be converted.'));
    document.getElementById('t-count').textContent = '';
    return;
  }
  add(body, notes());
  add(body, sessionHead(s));
  const all = itemsOf(s);
  shown = QUERY ? all.filter(it => searchable(it).includes(QUERY)) : all;
  const count = document.getElementById('t-count');
  if (QUERY) {
    const elsewhere = sessions.filter((o, i) => i !== current && itemsOf(o).some(it => searchable(it).includes(QUERY)));
    count.textContent = shown.length + (shown.length === 1 ? ' item matches' : ' items match');
    if (elsewhere.length) {
      const also = el('span', '', ' · also in ');
      elsewhere.slice(0, 5).forEach((o, k) => { if (k) add(also, txt(', ')); add(also, sessionButton(o.id)); });
      add(count, also);
    }
  } else count.textContent = all.length + ' items';
  drawn = 0;
  more();
  document.getElementById('t-scroll').scrollTop = 0;
}
function more() {
  const body = document.getElementById('t-body');
  const end = Math.min(shown.length, drawn + PAGE);
  const s = sessions[current];
  for (; drawn < end; drawn++) add(body, card(shown[drawn], s));
}
function notes() {
  const box = document.createDocumentFragment();
  if (D.notes.length) {
    const ul = el('ul', 'notes');
    for (const n of D.notes.slice(0, 50)) add(ul, el('li', '', n));
    if (D.notes.length > 50) add(ul, el('li', '', '… and ' + (D.notes.length - 50) + ' more'));
    add(box, ul);
  }
  return box;
}
function roots(s) {
  const m = new Map();
  const ws = s.header && s.header.workspace;
  if (ws && Array.isArray(ws.roots)) for (const r of ws.roots) if (r && typeof r.id === 'string') m.set(r.id, r.path);
  return m;
}
function pathText(p, s) {
  if (p && typeof p === 'object' && 'path' in p) {
    const base = p.root !== null && p.root !== undefined ? roots(s).get(p.root) : null;
    return base ? str(base).replace(/\/$/, '') + '/' + str(p.path) : str(p.path);
  }
  return typeof p === 'string' ? p : JSON.stringify(p);
}
function sessionHead(s) {
  const h = s.header || {};
  const box = el('div', 'shead');
  add(box, el('h2', '', s.id));
  const dl = el('dl');
  const row = (k, v) => { if (v !== null && v !== undefined && v !== '') { add(dl, plain('dt', '', k)); add(dl, el('dd', '', v)); } };
  if (h.agent) row('agent', [str(h.agent.name), h.agent.version ? ' ' + h.agent.version : '']);
  const r = [...roots(s).values()];
  if (r.length) row('workspace', r.map(str).join(', '));
  for (const p of s.links.parents) row(p.kind === 'fork' ? 'forked from' : 'subagent of', sessionButton(p.session));
  const kids = s.links.children;
  if (kids.length) {
    const span = el('span');
    kids.forEach((c, k) => { if (k) add(span, txt(', ')); add(span, sessionButton(c.session, c.kind === 'fork' ? 'fork' : 'subagent')); });
    row('sessions from it', span);
  }
  const lossy = h.producer && Array.isArray(h.producer.lossy) ? h.producer.lossy : [];
  if (lossy.length) row('declared losses', lossy.map(str).join(', '));
  // the connections the session's records came from, numbered from #0 across the inputs
  if (h.native && Array.isArray(h.native.connections)) {
    const conns = h.native.connections;
    row('recorded on', (conns.length === 1 ? 'connection ' : 'connections ') + conns.map(c => '#' + str(c)).join(', '));
  }
  row('records', str(s.records));
  add(box, dl);
  return box;
}
function blocks(content, s) {
  const out = [];
  if (!Array.isArray(content)) { if (content !== undefined && content !== null) out.push(json(content)); return out; }
  let prose = null;  // adjacent text blocks read as one text (chunks split words)
  const flush = () => { if (prose !== null) out.push(el('div', 'text', prose)); prose = null; };
  for (const b of content) {
    const t = b && typeof b === 'object' ? b.type : null;
    if ((t === 'text' || t === 'reasoning') && typeof b.text === 'string') {
      prose = (prose || '') + b.text;
      continue;
    }
    flush();
    if (t === null) out.push(json(b));
    else if (t === 'image' || t === 'audio') out.push(el('div', 'muted', '[' + t + ' ' + str(b.mimeType || '') + ', ' + fmtBytes(str(b.data || '').length * 3 / 4 | 0) + ' not shown]'));
    else if (t === 'resource_link') out.push(el('div', 'mono', 'link: ', str(b.name || ''), ' ', str(b.uri || '')));
    else if (t === 'resource' && b.resource && typeof b.resource === 'object') {
      out.push(el('div', 'mono', 'resource: ', str(b.resource.uri || '')));
      if (typeof b.resource.text === 'string') out.push(el('pre', '', b.resource.text));
    } else out.push(json(b));
  }
  flush();
  return out;
}
function foot(recs) {
  const f = el('div', 'foot');
  const r = recs.filter(Boolean);
  if (!r.length) return f;
  const first = r[0];
  const when = first.ts || first.observedAt;
  add(f, txt(r.map(x => str(x.id)).join(' ') + (when ? ' · ' + str(when) : '') + (first.observedAt && !first.ts ? ' (replayed)' : '')));
  const frames = [];
  for (const x of r) {
    const ref = x.native && x.native.ref;
    if (ref && Array.isArray(ref.frames)) for (const q of ref.frames) frames.push([ref.connection, q]);
  }
  if (frames.length && NF) {
    add(f, txt(' · frames '));
    const seen = new Set();
    for (const [c, q] of frames) {
      const key = c + ':' + q;
      if (seen.has(key)) continue;
      seen.add(key);
      add(f, button(str(q), () => timeline.reveal(frameAt(c, q))));
      add(f, txt(' '));
    }
  }
  return f;
}
let frameIndex = null;
function frameAt(conn, seq) {
  frames();
  if (!frameIndex) { frameIndex = new Map(); for (let i = 0; i < F.n; i++) frameIndex.set(F.conn[i] + ':' + F.seq[i], i); }
  const i = frameIndex.get(conn + ':' + seq);
  return i === undefined ? -1 : i;
}
function revised(it) { return it.revised ? plain('span', 'badge', 'revised ×' + it.revised) : null; }
function card(it, s) {
  switch (it.k) {
    case 'message': return message(it, s);
    case 'tool': return tool(it, s);
    case 'plan': return plan(it);
    case 'permission': return permission(it);
    case 'input': return input(it);
    case 'terminal': { const c = el('div', 'card terminal', el('div', 'h', plain('span', 'who', 'terminal'), revised(it))); add(c, terminal(it.r, s)); add(c, foot([it.r])); return c; }
    case 'changes': { const c = el('div', 'card changes', el('div', 'h', plain('span', 'who', 'file changes'), revised(it))); for (const fc of it.changes) add(c, fileChange(fc, s)); add(c, foot(it.changes)); return c; }
    case 'subagent': return subagent(it);
    case 'compaction': return compaction(it, s);
    case 'state': return state(it);
    case 'note': return note(it);
    default: return audit(it);
  }
}
const ROLES = ['user', 'assistant', 'system'];
function message(it, s) {
  const r = it.r;
  const role = str(r.role || 'message');
  const content = Array.isArray(r.content) ? r.content : [];
  const thought = content.length && content.every(b => b && b.type === 'reasoning');
  const c = el('div', 'card msg ' + (thought ? 'thought' : known(role, ROLES, 'other')));
  const h = el('div', 'h', plain('span', 'who', thought ? 'thought' : role));
  if (r.origin && r.origin !== 'prompt') add(h, badge(r.origin));
  if (r.author) add(h, badge(r.author));
  if (r.severity) add(h, badge(r.severity));
  if (r.from && typeof r.from === 'object' && typeof r.from.session === 'string') add(h, el('span', 'muted', ' from ', sessionButton(r.from.session)));
  add(h, revised(it));
  add(c, h);
  if (thought) {
    const d = el('details', 'thought', plain('summary', '', 'thought (' + textOf(content).length + ' characters)'));
    add(d, blocks(content, s));
    if (QUERY && searchable(it).includes(QUERY)) d.open = true;
    add(c, d);
  } else add(c, blocks(r.content, s));
  add(c, foot([r]));
  return c;
}
function tool(it, s) {
  const call = it.call || {}, res = it.result;
  const c = el('div', 'card tool');
  const h = el('div', 'h', plain('span', 'who', 'tool'), el('span', '', str(call.title || call.name || call.callId || '(no call record)')));
  if (call.kind) add(h, badge(call.kind));
  add(h, badge(res ? res.status : 'no result'));
  add(h, revised(it));
  add(c, h);
  c.dataset.callId = typeof call.callId === 'string' ? call.callId : JSON.stringify(call.callId);
  const meta = [];
  if (call.callId !== undefined) meta.push('call ' + (typeof call.callId === 'string' ? call.callId : JSON.stringify(call.callId)));
  if (call.name && call.title) meta.push('name ' + str(call.name));
  if (meta.length) add(c, el('div', 'muted mono', meta.join(' · ')));
  if (Array.isArray(call.locations) && call.locations.length) {
    add(c, plain('h3', '', 'locations'));
    add(c, el('div', 'mono', call.locations.map(l => pathText(l && l.path !== undefined ? l.path : l, s) + (l && l.line ? ':' + str(l.line) : '')).join('\n')));
  }
  if (call.input !== undefined) { add(c, plain('h3', '', 'input')); add(c, json(call.input)); }
  if (res) {
    if (Array.isArray(res.displayContent) && res.displayContent.length) { add(c, plain('h3', '', 'output')); add(c, blocks(res.displayContent, s)); }
    if (res.raw !== undefined) { add(c, plain('h3', '', 'raw output')); add(c, json(res.raw)); }
    if (res.otherContent !== undefined) { add(c, plain('h3', '', 'other content')); add(c, json(res.otherContent)); }
  }
  for (const fc of it.changes) add(c, fileChange(fc, s));
  for (const t of it.terminals) add(c, terminal(t, s));
  if (res && res.exec && !it.terminals.length) add(c, el('div', 'muted', 'terminal ' + str(res.exec.terminalId) + ' (no terminal record)'));
  add(c, foot([it.call, it.result, ...it.changes, ...it.terminals]));
  return c;
}
function fileChange(fc, s) {
  const box = el('div', 'fchange');
  add(box, el('h3', '', 'file change', badge(fc.status), badge(fc.precision)));
  if (Array.isArray(fc.changes)) {
    const ul = el('ul', 'mono');
    for (const ch of fc.changes) {
      if (!ch || typeof ch !== 'object') continue;
      add(ul, el('li', '', str(ch.op || '?') + ' ' + (ch.oldPath ? pathText(ch.oldPath, s) + ' → ' : '') + pathText(ch.path, s) + (ch.fileType && ch.fileType !== 'text' ? ' (' + ch.fileType + ')' : '')));
    }
    add(box, ul);
  }
  if (fc.patch && typeof fc.patch.text === 'string') add(box, diffView(fc.patch.text));
  return box;
}
function decode64(b64) {
  try {
    const bin = atob(str(b64));
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    return new TextDecoder('utf-8', {fatal: false}).decode(bytes);
  } catch (e) { return '(output not decodable)'; }
}
function terminal(t, s) {
  const box = el('div', 'term');
  add(box, el('h3', '', 'terminal ' + str(t.terminalId), badge(t.status), t.exitCode !== undefined && t.exitCode !== null ? badge('exit ' + t.exitCode) : null, t.signal ? badge(str(t.signal)) : null));
  if (t.command !== undefined) add(box, el('div', 'mono', '$ ' + (typeof t.command === 'string' ? t.command : JSON.stringify(t.command)) + (t.cwd ? '   (in ' + pathText(t.cwd, s) + ')' : '')));
  if (t.output && typeof t.output.blob === 'string') add(box, el('pre', 'termout', decode64(t.output.blob)));
  return box;
}
const PLAN_MARK = {pending: '○', in_progress: '◐', completed: '●'};
function plan(it) {
  const r = it.r;
  const c = el('div', 'card plan', el('div', 'h', plain('span', 'who', 'plan'), r.planType ? badge(r.planType) : null, revised(it)));
  if (Array.isArray(r.entries)) {
    const ul = el('ul');
    for (const e of r.entries) {
      if (!e || typeof e !== 'object') { add(ul, el('li', '', JSON.stringify(e))); continue; }
      const text = typeof e.content === 'string' ? e.content : textOf(e.content) || JSON.stringify(e.content);
      add(ul, el('li', '', plain('span', 'st', PLAN_MARK[e.status] || '?'), text, badge(e.status), e.priority ? badge(e.priority) : null));
    }
    add(c, ul);
  }
  if (r.uri) add(c, el('div', 'mono', str(r.uri)));
  if (r.content !== undefined) add(c, blocks(r.content));
  add(c, foot([r]));
  return c;
}
function permission(it) {
  const r = it.r;
  const c = el('div', 'card permission', el('div', 'h', plain('span', 'who', 'permission'), el('span', '', str(r.title || '')), badge(r.status), r.decision ? badge(r.decision) : null, revised(it)));
  if (r.description) add(c, el('div', 'text', str(r.description)));
  if (r.subject && typeof r.subject === 'object') {
    if (r.subject.callId !== undefined) add(c, el('div', 'muted', 'for tool call ' + str(r.subject.callId)));
    else if (r.subject.command !== undefined) add(c, el('div', 'mono', '$ ' + str(r.subject.command)));
    else add(c, json(r.subject));
  }
  if (Array.isArray(r.options)) {
    const ul = el('ul', 'opts');
    for (const o of r.options) {
      if (!o || typeof o !== 'object') continue;
      const li = el('li', o.optionId === r.selectedOptionId ? 'chosen' : '', (o.optionId === r.selectedOptionId ? '✔ ' : '  ') + str(o.name || o.optionId), badge(o.kind));
      add(ul, li);
    }
    add(c, ul);
  }
  add(c, el('div', 'muted', 'answer: ' + (r.selectedOptionId !== undefined ? str(r.selectedOptionId) : r.status === 'pending' ? 'none (never answered)' : str(r.decision || r.status))));
  add(c, foot([r]));
  return c;
}
function input(it) {
  const r = it.r;
  const c = el('div', 'card input', el('div', 'h', plain('span', 'who', 'question'), r.mode ? badge(r.mode) : null, badge(r.status), revised(it)));
  if (r.message) add(c, el('div', 'text', str(r.message)));
  if (r.url) add(c, el('div', 'mono', 'url: ' + str(r.url)));
  if (r.requestedSchema && r.requestedSchema.properties && typeof r.requestedSchema.properties === 'object') {
    const ul = el('ul', 'mono');
    for (const [k, v] of Object.entries(r.requestedSchema.properties)) add(ul, el('li', '', k + (v && v.type ? ': ' + str(v.type) : '') + (v && v.description ? ' — ' + str(v.description) : '')));
    add(c, ul);
  }
  if (r.response !== undefined) { add(c, plain('h3', '', 'answer')); add(c, json(r.response)); }
  if (r.capture && r.capture.response) add(c, el('div', 'muted', 'answer ' + str(r.capture.response.state) + (Array.isArray(r.capture.response.fields) ? ': ' + r.capture.response.fields.map(str).join(', ') : '')));
  add(c, foot([r]));
  return c;
}
function subagent(it) {  // ASR-721: state is the child's StateUpdate snapshot ({state, stopReason, error, usage})
  const r = it.r;
  const st = r.state && typeof r.state === 'object' && !Array.isArray(r.state) ? r.state : null;
  const now = st ? st.state : r.state;
  const c = el('div', 'card subagent', el('div', 'h', plain('span', 'who', 'subagent'), el('span', '', str(r.title || '')), now !== null && now !== undefined ? badge(now) : null, revised(it)));
  if (typeof r.childSession === 'string') add(c, el('div', '', 'session ', sessionButton(r.childSession)));
  if (r.description) add(c, el('div', 'text', str(r.description)));
  if (st) {
    const said = [];
    if (st.stopReason !== undefined && st.stopReason !== null) said.push('stop reason ' + (typeof st.stopReason === 'string' ? st.stopReason : JSON.stringify(st.stopReason)));
    if (st.error !== undefined && st.error !== null) said.push('error ' + JSON.stringify(st.error));
    if (st.usage !== undefined && st.usage !== null) said.push('usage ' + JSON.stringify(st.usage));
    if (said.length) add(c, el('div', 'muted state', 'state: ', said.join(' · ')));
  }
  add(c, foot([r]));
  return c;
}
function compaction(it, s) {
  const r = it.r;
  const c = el('div', 'card compaction', el('div', 'h', plain('span', 'who', 'compaction'), badge(r.status), revised(it)));
  if (r.replaces && r.replaces.throughId) add(c, el('div', 'muted', 'replaces the context through ' + str(r.replaces.throughId)));
  const d = el('details', 'more', plain('summary', '', 'summary'));
  if (r.summary !== undefined) add(d, blocks(r.summary, s)); else add(d, plain('p', 'muted', 'not recorded'));
  add(c, d);
  add(c, foot([r]));
  return c;
}
function state(it) {
  const r = it.r;
  const line = el('div', 'line', '— ' + str(r.state));
  if (r.stopReason) add(line, txt(' (' + str(r.stopReason) + ')'));
  if (r.error) add(line, txt(' error: ' + JSON.stringify(r.error)));
  add(line, txt(' · ' + str(r.id)));
  return line;
}
function note(it) {
  const r = it.r;
  let what;
  if (r.type === 'usage_summary') what = 'usage: ' + (r.contextWindow ? str(r.contextWindow.used) + ' / ' + str(r.contextWindow.size) + ' context' : '') + (r.cost ? ' · cost ' + str(r.cost.amount) + ' ' + str(r.cost.currency) : '');
  else if (r.type === 'session_info') what = 'title: ' + str(r.title);
  else if (r.type === 'config_change') what = 'config: ' + [r.model ? 'model ' + JSON.stringify(r.model) : '', r.mode !== undefined ? 'mode ' + JSON.stringify(r.mode) : ''].filter(Boolean).join(', ') + (Array.isArray(r.options) ? ' (' + r.options.length + ' options)' : '');
  else what = str(r.type);
  return el('div', 'line', '— ' + what + ' · ' + str(r.id));
}
function audit(it) {
  const r = it.r;
  const d = el('details', 'more', plain('summary', '', 'kept as received: ' + str(r.type)));
  add(d, json(r.native && r.native.record !== undefined ? r.native.record : r));
  const c = el('div', 'card audit', d);
  add(c, foot([r]));
  return c;
}

// ---- timeline --------------------------------------------------------------------
const ROW = 22;
const timeline = (function () {
  let built = false, rows = [], member = null, runs = [], selected = -1, rawLow = null, pool = [];
  const vis = {session: '', kind: '', method: '', dir: '', q: '', runs: true};
  let viol = {};
  function option(sel, value, label) { const o = document.createElement('option'); o.value = value; o.textContent = label; add(sel, o); }
  function setup() {
    frames();
    viol = F.viol || {};
    const fs = document.getElementById('f-session');
    option(fs, '', 'all sessions');
    const sids = new Set(); for (const x of F.sid) if (x >= 0) sids.add(x);
    option(fs, '-1', '(no session)');
    for (const x of [...sids].sort((a, b) => S[a] < S[b] ? -1 : 1)) option(fs, str(x), S[x]);
    const fk = document.getElementById('f-kind');
    option(fk, '', 'every kind');
    KINDS.forEach((k, i) => option(fk, str(i), k));
    if (D.validated) option(fk, 'v', '⚠ spec violations');
    const fm = document.getElementById('f-method');
    option(fm, '', 'every method');
    const ms = new Set(); for (const x of F.method) if (x >= 0) ms.add(x);
    for (const x of [...ms].sort((a, b) => S[a] < S[b] ? -1 : 1)) option(fm, str(x), S[x]);
    const on = (id, key, ev) => document.getElementById(id).addEventListener(ev || 'change', e => {
      vis[key] = e.target.type === 'checkbox' ? e.target.checked : e.target.value;
      if (key === 'q') vis.q = vis.q.toLowerCase();
      rebuild();
    });
    on('f-session', 'session'); on('f-kind', 'kind'); on('f-method', 'method'); on('f-dir', 'dir'); on('f-runs', 'runs');
    on('f-search', 'q', 'input');
    const sc = document.getElementById('tl-scroll');
    sc.addEventListener('scroll', () => requestAnimationFrame(draw));
    window.addEventListener('resize', () => requestAnimationFrame(draw));
    document.getElementById('tl-space').addEventListener('click', e => {
      const row = e.target.closest('.tl-row');
      if (!row) return;
      if (row.dataset.frame) { select(+row.dataset.frame); return; }
      const r = rows[+row.dataset.row];
      if (r < 0) { runs[-r - 1].open = !runs[-r - 1].open; layout(); }
    });
    built = true;
  }
  function chunkKey(i) {
    if (F.kind[i] !== 3 || F.upd[i] < 0 || !S[F.upd[i]].endsWith('_chunk')) return null;
    return F.conn[i] + ' ' + F.dir[i] + ' ' + F.sid[i] + ' ' + F.upd[i];
  }
  let list = null;
  function rebuild() {
    const out = [];
    const sid = vis.session === '' ? null : +vis.session;
    const bad = vis.kind === 'v', kind = vis.kind === '' || bad ? null : +vis.kind;
    const method = vis.method === '' ? null : +vis.method, dir = vis.dir === '' ? null : +vis.dir;
    const q = vis.q;
    if (q && !rawLow) rawLow = F.raw.map(r => r.toLowerCase());
    for (let i = 0; i < F.n; i++) {
      if (sid !== null && F.sid[i] !== sid) continue;
      if (kind !== null && F.kind[i] !== kind) continue;
      if (bad && !viol[str(i)]) continue;
      if (method !== null && F.method[i] !== method) continue;
      if (dir !== null && F.dir[i] !== dir) continue;
      if (q && !rawLow[i].includes(q)) continue;
      out.push(i);
    }
    list = out;
    runs = [];
    if (vis.runs) {
      let k = 0;
      while (k < out.length) {
        const key = chunkKey(out[k]);
        let e = k + 1;
        if (key !== null) while (e < out.length && chunkKey(out[e]) === key) e++;
        if (e - k > 1) { runs.push({members: out.slice(k, e), open: false, at: k}); }
        k = e;
      }
    }
    const c = document.getElementById('f-count');
    c.textContent = out.length === F.n ? F.n + ' frames' : out.length + ' of ' + F.n + ' frames';
    layout();
  }
  function layout() {
    rows = [];
    const opened = [];
    const out = list;
    let r = 0, k = 0;
    while (k < out.length) {
      if (r < runs.length && runs[r].at === k) {
        rows.push(-r - 1);
        if (runs[r].open) for (const i of runs[r].members) { rows.push(i); opened.push(rows.length - 1); }
        k += runs[r].members.length;
        r++;
      } else rows.push(out[k++]);
    }
    member = new Uint8Array(rows.length);
    for (const k of opened) member[k] = 1;
    document.getElementById('tl-space').style.height = (rows.length * ROW) + 'px';
    for (const p of pool) p.dataset.at = '';
    draw();
  }
  function cells(row, values) {
    for (let c = 0; c < 10; c++) row.children[c].textContent = values[c];
  }
  function mkRow() {
    const row = document.createElement('div');
    row.className = 'tl-row';
    for (let c = 0; c < 10; c++) add(row, document.createElement('span'));
    return row;
  }
  function frameCells(i) {
    const v = viol[str(i)];
    return [str(F.seq[i]), F.t[i] === null ? '' : fmtNs(F.t[i]), ARROW[F.dir[i]], KINDS[F.kind[i]],
            F.method[i] >= 0 ? S[F.method[i]] + (F.upd[i] >= 0 ? ' ' + S[F.upd[i]] : '') : '',
            F.id[i] === null ? '' : F.id[i], F.sid[i] >= 0 ? S[F.sid[i]] : '', str(F.size[i]),
            F.lat[i] === null ? (F.pair[i] >= 0 ? '↔' : '') : fmtNs(F.lat[i]), v ? '⚠ ' + v.length : ''];
  }
  function runCells(run) {
    const m = run.members, i = m[0], last = m[m.length - 1];
    let size = 0; for (const x of m) size += F.size[x];
    return [F.seq[i] + '…', F.t[i] === null ? '' : fmtNs(F.t[i]), ARROW[F.dir[i]], 'notification',
            (run.open ? '▾ ' : '▸ ') + m.length + ' × ' + S[F.upd[i]] + ' (seq ' + F.seq[i] + '–' + F.seq[last] + ')',
            '', F.sid[i] >= 0 ? S[F.sid[i]] : '', str(size), '', ''];
  }
  function draw() {
    const sc = document.getElementById('tl-scroll'), space = document.getElementById('tl-space');
    if (!sc.clientHeight && !rows.length) return;
    const first = Math.max(0, Math.floor(sc.scrollTop / ROW) - 5);
    const last = Math.min(rows.length, Math.ceil((sc.scrollTop + sc.clientHeight) / ROW) + 5);
    const need = last - first;
    while (pool.length < need) { const r = mkRow(); pool.push(r); add(space, r); }
    // a row's element is pool[row % size]: while a row stays in sight it keeps its
    // element, so a click lands on the row it was aimed at even as the list scrolls
    const size = pool.length;
    for (const row of pool) row.hidden = true;
    for (let at = first; at < last; at++) {
      const row = pool[at % size];
      row.hidden = false;
      const r = rows[at];
      row.style.top = (at * ROW) + 'px';
      row.dataset.row = str(at);
      const key = str(r) + (r < 0 && runs[-r - 1].open ? 'o' : '') + (member[at] ? 'm' : '');
      const selClass = r === selected;
      if (row.dataset.at !== key) {
        row.dataset.at = key;
        if (r < 0) {
          cells(row, runCells(runs[-r - 1]));
          row.className = 'tl-row run ' + (F.dir[runs[-r - 1].members[0]] ? 'a2c' : 'c2a');
          row.dataset.frame = '';
        } else {
          cells(row, frameCells(r));
          row.className = 'tl-row ' + (F.dir[r] ? 'a2c' : 'c2a') + (member[at] ? ' member' : '');
          row.children[3].className = 'k-' + KINDS[F.kind[r]];
          row.children[9].className = viol[str(r)] ? 'viol' : '';
          row.dataset.frame = str(r);
        }
      }
      row.classList.toggle('sel', selClass);
    }
  }
  function select(i) {
    selected = i;
    for (const p of pool) p.classList.toggle('sel', p.dataset.frame === str(i));
    detail(i);
  }
  function detail(i) {
    const box = document.getElementById('detail');
    clear(box);
    const b64 = F.b64.includes(i);
    add(box, el('h3', '', '#' + F.seq[i] + ' ' + ARROW[F.dir[i]] + ' ' + KINDS[F.kind[i]] + (F.method[i] >= 0 ? ' ' + S[F.method[i]] : '')));
    const dl = el('dl');
    const row = (k, v) => { add(dl, plain('dt', '', k)); add(dl, el('dd', '', v)); };
    row('direction', F.dir[i] ? 'agent → client (a2c)' : 'client → agent (c2a)');
    if (F.t[i] !== null) row('time', [isoNs(F.t0, F.t[i]), ' (+' + fmtNs(F.t[i]) + ')']);
    if (F.id[i] !== null) row('id', F.id[i]);
    if (F.sid[i] >= 0) row('session', byId.has(S[F.sid[i]]) ? sessionButton(S[F.sid[i]]) : S[F.sid[i]]);
    if (F.upd[i] >= 0) row('update', S[F.upd[i]]);
    row('size', F.size[i] + ' bytes');
    if (D.inputs.length > 1 || F.conn[F.n - 1] > 0) row('connection', '#' + str(F.conn[i]));
    const p = F.pair[i];
    if (p >= 0) row(F.kind[i] === 0 ? 'answered by' : 'answers', [button('#' + F.seq[p] + ' ' + KINDS[F.kind[p]], () => reveal(p)), F.lat[i] !== null ? ' after ' + fmtNs(F.lat[i]) : '']);
    else if (F.kind[i] === 0) row('answered by', 'no response in the recording');
    const v = viol[str(i)];
    if (v) {
      const ul = el('ul', 'viols');
      for (const x of v) {
        const li = el('li', '', plain('span', 'badge b-failed', str(x.rule)), ' ', x.pointer ? el('code', '', x.pointer + ' ') : null, str(x.message));
        if (x.words) add(li, el('div', 'muted', '“' + x.words + '”' + (x.schema ? ' (' + x.schema + (x.location || '') + ')' : '')));
        if (x.related !== undefined) add(li, el('div', 'muted', 'see frame #' + x.related));
        add(ul, li);
      }
      row('spec', ul);
    }
    else row('spec', D.validated ? 'no violation' : 'not validated');
    const flags = [];
    if (F.redacted.includes(i)) flags.push('secrets redacted by the recorder');
    if (F.nolf.includes(i)) flags.push('no LF at the end');
    if (b64) flags.push('not UTF-8: bytes shown in hex');
    if (flags.length) row('note', flags.join('; '));
    add(box, dl);
    add(box, plain('h3', '', 'raw frame (exact bytes)'));
    const pre = document.createElement('pre');
    pre.className = 'raw';
    pre.id = 'raw';
    pre.textContent = b64 ? hexdump(F.raw[i]) : F.raw[i];
    add(box, pre);
    if (!b64) {
      try {
        const parsed = JSON.parse(F.raw[i]);
        const d = el('details', 'more', plain('summary', '', 'parsed (indented)'));
        add(d, json(parsed));
        add(box, d);
      } catch (e) { /* not JSON: the raw bytes say so */ }
    }
  }
  function hexdump(b64) {
    let bin = '';
    try { bin = atob(b64); } catch (e) { return b64; }
    const lines = [];
    for (let o = 0; o < bin.length; o += 16) {
      const chunk = bin.slice(o, o + 16);
      let hex = '', asc = '';
      for (let k = 0; k < chunk.length; k++) {
        const c = chunk.charCodeAt(k);
        hex += c.toString(16).padStart(2, '0') + ' ';
        asc += c >= 32 && c < 127 ? chunk[k] : '.';
      }
      lines.push(o.toString(16).padStart(8, '0') + '  ' + hex.padEnd(48) + ' ' + asc);
    }
    return lines.join('\n');
  }
  function reveal(i) {
    if (i < 0) return;
    showTab('timeline');
    let at = rows.indexOf(i);
    if (at < 0) {
      const run = runs.find(r => r.members.includes(i));
      if (run) { run.open = true; layout(); at = rows.indexOf(i); }
    }
    if (at < 0) {  // filtered out: show everything again
      for (const [id, key] of [['f-session', 'session'], ['f-kind', 'kind'], ['f-method', 'method'], ['f-dir', 'dir'], ['f-search', 'q']]) { document.getElementById(id).value = ''; vis[key] = ''; }
      rebuild();
      at = rows.indexOf(i);
      if (at < 0) { const run = runs.find(r => r.members.includes(i)); if (run) { run.open = true; layout(); at = rows.indexOf(i); } }
    }
    const sc = document.getElementById('tl-scroll');
    sc.scrollTop = Math.max(0, at * ROW - sc.clientHeight / 3);
    draw();
    select(i);
  }
  function show() {
    if (!built) { setup(); rebuild(); }
    draw();
    document.body.dataset.timeline = '1';
    performance.mark('acp-view:timeline');
  }
  return {show, reveal, select};
})();

// ---- start -----------------------------------------------------------------------
function start() {
  title();
  sessionList();
  markCurrent();
  document.getElementById('tab-transcript').addEventListener('click', () => showTab('transcript'));
  document.getElementById('tab-timeline').addEventListener('click', () => showTab('timeline'));
  let pending = 0;
  document.getElementById('t-search').addEventListener('input', e => {
    clearTimeout(pending);
    pending = setTimeout(() => { QUERY = e.target.value.toLowerCase(); renderTranscript(); }, 120);
  });
  const sentinel = document.getElementById('t-more');
  observer = new IntersectionObserver(es => { if (es.some(x => x.isIntersecting) && drawn < shown.length) more(); },
                                      {root: document.getElementById('t-scroll'), rootMargin: '600px'});
  observer.observe(sentinel);
  if (sessions.length) { renderTranscript(); showTab('transcript'); }
  else { renderTranscript(); showTab(NF ? 'timeline' : 'transcript'); }
  document.body.dataset.ready = '1';
  performance.mark('acp-view:ready');  // how long the page took to open (bench/bench_view.py)
}
start();
