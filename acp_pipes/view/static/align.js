
const SUM = D.summary, A = D.a, B = D.b, ROWS = D.rows;
const ARROWS = {c2a: '→', a2c: '←'};
const MARK = {equal: '', 'only-a': '−', 'only-b': '+', changed: '≠', note: '~', gap: ''};
// a note (a step one run lacks that the model of the same session tolerates) is no
// difference: navigation passes it by, as it does equal steps
const SAME = {equal: true, gap: true, note: true};
let onlyDiff = false, list = [], drawn = 0, selected = -1;
const PAGE = 400;
// ops come in the order every format lists them: the first that is not equal is where
// the runs first part ways (the summary's first_divergence)
const firstRow = ROWS.findIndex(r => !SAME[r.op]);
function name(side) { return str(side.source) + (side.session ? ' (session ' + str(side.session) + ')' : ''); }
function head() {
  document.title = 'acp-align: ' + A.source + ' vs ' + B.source;
  document.getElementById('title').textContent = A.source + '  ⇄  ' + B.source;
  const v = document.getElementById('verdict');
  v.textContent = SUM.equal ? 'equal' : 'different';
  v.classList.add(SUM.equal ? 'b-equal' : 'b-failed');
  const c = SUM.counts || {};
  const parts = [A.steps + ' and ' + B.steps + ' steps', (c.equal !== undefined ? c.equal : SUM.lcs) + ' equal'];
  if (c.changed) parts.push(c.changed + ' changed');
  parts.push((c['only-a'] || 0) + ' only in A', (c['only-b'] || 0) + ' only in B', 'edit distance ' + SUM.distance);
  if (c.notes) parts.push(c.notes + ' tolerated (notes)');
  if (SUM.approximate) parts.push('approximate (--max-cost)');
  document.getElementById('summary').textContent = parts.join(' · ');
  document.getElementById('name-a').textContent = name(A);
  document.getElementById('name-b').textContent = name(B);
  const notes = [];
  if (D.truncated) notes.push('This page holds the first ' + ROWS.length + ' rows; acp-align --format diff or ops has them all.');
  if (SUM.first_divergence) {
    const fd = SUM.first_divergence;
    notes.push('First divergence: ' + (fd.a !== null && fd.a !== undefined ? 'A step ' + fd.a : 'A ended') + ', ' + (fd.b !== null && fd.b !== undefined ? 'B step ' + fd.b : 'B ended') + '.');
  }
  const box = document.getElementById('notes');
  if (notes.length) { const ul = el('ul', 'notes'); for (const n of notes) add(ul, el('li', '', n)); add(box, ul); }
}
function label(side, i, r) {
  if (i === null || i === undefined) return '';
  const s = side.shown[str(i)];
  const arrow = side.kind === 'trace' && r.dir ? ARROWS[r.dir] + ' ' : '';
  return arrow + (s ? s[0] : '?');
}
const OPS = ['equal', 'only-a', 'only-b', 'changed', 'note', 'gap'];
function rowEl(k) {
  const r = ROWS[k];
  const row = el('div', 'sbs-row ' + known(r.op, OPS, 'other'));
  row.dataset.row = str(k);
  if (r.op === 'gap') {
    add(row, plain('span', 'ix', ''));
    add(row, plain('span', 'lb', '… ' + r.n + ' equal steps (A ' + r.a[0] + '–' + r.a[1] + ', B ' + r.b[0] + '–' + r.b[1] + ') …'));
    return row;
  }
  const la = el('span', 'la'), lb = el('span', 'lb');
  if (k === firstRow) { add(la, plain('span', 'fd', 'first divergence')); row.classList.add('first'); row.id = 'first-divergence'; }
  add(la, label(A, r.a, r));
  add(lb, label(B, r.b, r));
  add(row, [plain('span', 'ix ia', r.a === null ? '' : str(r.a)), la, plain('span', 'mk', r.op in MARK ? MARK[r.op] : '?'),
            plain('span', 'ix ib', r.b === null ? '' : str(r.b)), lb]);
  return row;
}
function rebuild() {
  list = [];
  for (let k = 0; k < ROWS.length; k++) if (!onlyDiff || !SAME[ROWS[k].op]) list.push(k);
  const body = document.getElementById('sbs-body');
  clear(body);
  drawn = 0;
  more();
}
function more(upTo) {
  const body = document.getElementById('sbs-body');
  const end = Math.min(list.length, Math.max(drawn + PAGE, upTo === undefined ? 0 : upTo + 1));
  for (; drawn < end; drawn++) add(body, rowEl(list[drawn]));
}
function goTo(k) {
  if (k < 0) return;
  let at = list.indexOf(k);
  if (at < 0) { onlyDiff = false; document.getElementById('only-diff').checked = false; rebuild(); at = list.indexOf(k); }
  more(at);
  const row = document.querySelector('.sbs-row[data-row="' + k + '"]');
  if (row) { row.scrollIntoView({block: 'center'}); select(k); }
}
function diffs() { const out = []; ROWS.forEach((r, k) => { if (!SAME[r.op]) out.push(k); }); return out; }
function select(k) {
  selected = k;
  for (const e of document.querySelectorAll('.sbs-row.sel')) e.classList.remove('sel');
  const row = document.querySelector('.sbs-row[data-row="' + k + '"]');
  if (row) row.classList.add('sel');
  const r = ROWS[k], box = document.getElementById('detail');
  clear(box);
  if (r.op === 'gap') { add(box, plain('p', 'muted', r.n + ' equal steps, folded.')); return; }
  add(box, el('h3', '', (r.op === 'changed' ? 'changed step' : r.op === 'equal' ? 'equal step' : r.op === 'note' ? 'tolerated: ' + str(r.note) : r.op === 'only-a' ? 'only in A' : 'only in B') + (r.difference ? ' (' + str(r.difference) + ')' : '') + (k === firstRow ? ' — the first divergence' : '')));
  if (Array.isArray(r.diff)) {
    const t = el('table', 'fields');
    add(t, el('tr', '', plain('th', '', 'pointer'), plain('th', '', 'A'), plain('th', '', 'B')));
    for (const d of r.diff) {
      const show = (side) => d[side] === undefined ? '(absent)' : JSON.stringify(d[side]);
      add(t, el('tr', '', el('td', '', str(d.path)), el('td', 'va', show('a')), el('td', 'vb', show('b'))));
    }
    add(box, plain('h3', '', 'fields that differ'));
    add(box, t);
    if (r.cut) add(box, plain('p', 'muted', 'more differences than shown'));
  }
  const side = (s, i, tag) => {
    const d = el('div');
    add(d, plain('h3', '', tag + (i === null ? '' : ' step ' + i)));
    if (i === null || i === undefined) { add(d, plain('p', 'muted', '(no step)')); return d; }
    const s2 = s.shown[str(i)];
    add(d, el('div', 'muted', s2 ? s2[0] : ''));
    const pre = el('pre', 'raw', s2 && s2[1] !== null ? s2[1] : '(bytes that are not UTF-8)');
    pre.id = 'raw-' + tag.toLowerCase();
    add(d, pre);
    return d;
  };
  add(box, el('div', 'pair', side(A, r.a, 'A'), side(B, r.b, 'B')));
}
function start() {
  head();
  rebuild();
  document.getElementById('sbs-body').addEventListener('click', e => {
    const row = e.target.closest('.sbs-row');
    if (row) select(+row.dataset.row);
  });
  document.getElementById('only-diff').addEventListener('change', e => { onlyDiff = e.target.checked; rebuild(); });
  document.getElementById('go-first').addEventListener('click', () => goTo(firstRow));
  document.getElementById('go-next').addEventListener('click', () => { const d = diffs(); const n = d.find(k => k > selected); goTo(n === undefined ? d[0] : n); });
  document.getElementById('go-prev').addEventListener('click', () => { const d = diffs(); const p = d.filter(k => k < selected).pop(); goTo(p === undefined ? d[d.length - 1] : p); });
  const obs = new IntersectionObserver(es => { if (es.some(x => x.isIntersecting) && drawn < list.length) more(); },
                                       {root: document.getElementById('sbs-scroll'), rootMargin: '600px'});
  obs.observe(document.getElementById('sbs-more'));
  if (firstRow >= 0) goTo(firstRow);
  else document.getElementById('go-first').hidden = true;
  document.body.dataset.ready = '1';
  performance.mark('acp-view:ready');
}
start();
