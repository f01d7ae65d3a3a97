// hpcviewer's profile view: a tree table (top-down, bottom-up, flat) with virtual
// scrolling over the rows currently expanded, fed by hpcserver's JSON API (one request
// per expansion). Plain script, no build step, no external requests.
'use strict';

let ROW = 22;  // a row's height in pixels: follows the text size (hpcviewer's bigger and smaller text)
const token = new URLSearchParams(location.search).get('token') || '';
const $ = (id) => document.getElementById(id);

const hpc = {
  info: null,
  // GET /api/<endpoint>?params; the token goes in a header (the page's cookie too).
  async api(endpoint, params = {}) {
    const q = new URLSearchParams(params).toString();
    const r = await fetch(`/api/${endpoint}${q ? '?' + q : ''}`, { headers: { 'X-HPC-Token': token } });
    const j = await r.json().catch(() => ({ error: `bad reply (${r.status})` }));
    if (!r.ok) throw new Error(j.error || `HTTP ${r.status}`);
    return j;
  },
  status(msg, error = false) {
    const s = $('status');
    s.textContent = msg;
    s.classList.toggle('error', error);
  },
  fmt(v) {
    if (v === undefined || v === null || Number.isNaN(v)) return '';
    if (v === 0) return '0';
    const a = Math.abs(v);
    return a >= 1e6 || a < 1e-3 ? v.toExponential(3) : Number(v.toPrecision(6)).toString();
  },
};

// ---- Derived metrics: a small expression language over metric indices, never eval().
// expr := term (('+'|'-') term)*; term := unary (('*'|'/') unary)*; unary := '-' unary | atom
// atom := number | '$' index | fn '(' expr (',' expr)* ')' | '(' expr ')'
function compileFormula(src) {
  const toks = src.match(/\$\d+|\d+\.?\d*(?:e[+-]?\d+)?|[a-z]+|[-+*/(),]|\S/gi) || [];
  let i = 0;
  const peek = () => toks[i], next = () => toks[i++];
  const fns = { min: Math.min, max: Math.max, abs: Math.abs, sqrt: Math.sqrt, log: Math.log, exp: Math.exp };
  const refs = new Set();
  function atom() {
    const t = next();
    if (t === undefined) throw new Error('formula ends early');
    if (t === '(') { const e = expr(); if (next() !== ')') throw new Error("missing ')'"); return e; }
    if (t[0] === '$') { const k = Number(t.slice(1)); refs.add(k); return (v) => v[k] ?? 0; }
    if (/^\d/.test(t)) { const n = Number(t); return () => n; }
    if (fns[t.toLowerCase()]) {
      const f = fns[t.toLowerCase()];
      if (next() !== '(') throw new Error(`'(' expected after ${t}`);
      const args = [expr()];
      while (peek() === ',') { next(); args.push(expr()); }
      if (next() !== ')') throw new Error("missing ')'");
      return (v) => f(...args.map((a) => a(v)));
    }
    throw new Error(`unexpected '${t}'`);
  }
  function unary() { if (peek() === '-') { next(); const a = unary(); return (v) => -a(v); } return atom(); }
  function term() {
    let a = unary();
    while (peek() === '*' || peek() === '/') {
      const op = next(), b = unary(), l = a;
      a = op === '*' ? (v) => l(v) * b(v) : (v) => { const d = b(v); return d === 0 ? NaN : l(v) / d; };
    }
    return a;
  }
  function expr() {
    let a = term();
    while (peek() === '+' || peek() === '-') {
      const op = next(), b = term(), l = a;
      a = op === '+' ? (v) => l(v) + b(v) : (v) => l(v) - b(v);
    }
    return a;
  }
  const f = expr();
  if (i !== toks.length) throw new Error(`unexpected '${toks[i]}'`);
  return { f, refs };
}

// ---- The tree table.
const table = {
  view: 'top-down',
  columns: [],         // {metric, label, derived?: {f, text}, baseline?, delta?} (the last two: hpcserver --compare)
  sortCol: 0,
  sortExc: false,
  roots: [],           // nodes: {key, name, inc[], exc[], hasChildren, children, expanded, depth, ctx?, path?, file?, line?}
  visible: [],
  selected: null,
  search: '',
  zoom: [],            // zoomed in: the {roots, baseDepth} to go back to, innermost last
  baseDepth: 0,        // the depth of the rows shown outermost (zoomed in: the zoomed row's)
  flatDepth: 0,        // the static structure flattened this many times (hpcviewer's Flatten)
  profiles: null,      // the thread view: profile.db rows whose values alone are shown (top-down)
  totals: null,        // their totals by metric, for the percentages

  metricTotal(m) {
    if (this.profiles && this.totals && this.view === 'top-down') return this.totals[m] || 0;
    return hpc.info.metrics[m]?.total || 0;
  },
  childParams(ctx) {
    const p = this.profiles ? { ctx, profiles: this.profiles.join(',') } : { ctx };
    const f = filters.active();
    if (f.length) p.filter = JSON.stringify(f);
    if (this.columns.some((c) => c.stat)) p.stats = 1;
    return p;
  },
  // The flat view as hpcviewer's outline: modules, files, functions, loops, lines, inlined
  // code and call sites (/api/structure), rather than one list.
  structured() { return this.view === 'flat' && $('flat-by').value === 'structure'; },
  value(node, col, exc) {
    const vals = exc ? node.exc : node.inc;
    if (col.stat) {  // a statistic over the profiles (hpcprof -M stats): top-down rows only
      const st = node.stats?.[exc ? 'exc' : 'inc']?.[col.metric];
      if (!st) return NaN;
      if (col.stat === 'cv') return st.mean ? st.stddev / st.mean : NaN;
      return st[col.stat] ?? NaN;
    }
    if (col.baseline || col.delta) {  // the baseline database's value at the matching row, or the change
      const b = node.base ? (exc ? node.base.exc : node.base.inc)[col.metric] : undefined;
      if (b === undefined) return NaN;
      return col.baseline ? b : vals[col.metric] - b;
    }
    if (col.derived) { const r = col.derived.f(vals); return Number.isFinite(r) ? r : NaN; }
    return vals[col.metric];
  },

  header() {
    const h = $('table-head');
    h.innerHTML = '';
    const name = document.createElement('div');
    name.className = 'name';
    name.textContent = this.view === 'bottom-up' ? 'Function ← callers' : this.view === 'flat' ? 'Name' : 'Calling context';
    h.append(name);
    // Each column is a value (92 px, or as fitted) and its percentage (62), inclusive and exclusive.
    const widths = this.columns.map((c) => c.width || 92);
    document.documentElement.style.setProperty('--metrics-width', `${widths.reduce((a, w) => a + 2 * (w + 62), 0)}px`);
    this.columns.forEach((c, ci) => {
      for (const exc of [false, true]) {
        const d = document.createElement('div');
        d.className = 'num' + (this.sortCol === ci && this.sortExc === exc ? ' sorted' : '');
        if (c.width) d.style.width = `${c.width}px`;
        d.textContent = `${c.label} (${exc ? 'E' : 'I'})`;
        const what = c.baseline ? `the baseline's ${hpc.info.metrics[c.metric]?.name}`
          : c.delta ? `the change of ${hpc.info.metrics[c.metric]?.name} against the baseline` : c.label;
        d.title = `sort by ${what} ${exc ? 'exclusive' : 'inclusive'}`;
        d.dataset.col = ci;
        d.dataset.exc = exc ? '1' : '';
        d.onclick = () => { this.sortCol = ci; this.sortExc = exc; this.resort(); };
        if (ci > 0 && exc) {
          const x = document.createElement('span');
          x.className = 'x'; x.textContent = '×'; x.title = 'remove column';
          x.onclick = (ev) => { ev.stopPropagation(); this.columns.splice(ci, 1); this.sortCol = 0; this.header(); this.resort(); };
          d.append(x);
        }
        const p = document.createElement('div');
        p.className = 'pct';
        p.textContent = '%';
        h.append(d, p);
      }
    });
  },

  // Sorts `list` and every loaded list below it; iterative: an expanded chain can be deeper
  // than the script's stack.
  sortKids(list) {
    const c = this.columns[this.sortCol];
    if (!c) return;
    const todo = [list];
    while (todo.length) {
      const l = todo.pop();
      l.sort((a, b) => (this.value(b, c, this.sortExc) || 0) - (this.value(a, c, this.sortExc) || 0));
      for (const n of l) if (n.children) todo.push(n.children);
    }
  },
  resort() { this.sortKids(this.roots); this.header(); this.refresh(); },

  makeNodes(rows, depth, parent) {
    return rows.map((r) => ({ ...r, depth, parent, children: null, expanded: false,
      name: r.kind === 'call' ? r.name.replace(/^-> /, '→ ') : r.name,
      key: this.view === 'top-down' ? 'c' + r.ctx : this.view === 'bottom-up' || r.path ? r.path : 'k' + r.key }));
  },

  // hpcviewer's zoom: the selected row and what lies below it alone, and back.
  zoomIn() {
    const n = this.selected;
    if (!n || (this.roots.length === 1 && this.roots[0] === n)) return;
    this.zoom.push({ roots: this.roots, baseDepth: this.baseDepth });
    this.roots = [n];
    this.baseDepth = n.depth;
    $('zoom-out').disabled = false;
    this.refresh();
    this.select(n, true);
  },
  zoomOut() {
    const z = this.zoom.pop();
    if (!z) return;
    this.roots = z.roots;
    this.baseDepth = z.baseDepth;
    $('zoom-out').disabled = this.zoom.length === 0;
    this.sortKids(this.roots);
    this.refresh();
    if (this.selected) this.select(this.selected, true);
  },

  async load() {
    // A later load (another view or grouping chosen meanwhile) wins: this one's reply is dropped.
    const seq = this.loadSeq = (this.loadSeq || 0) + 1;
    this.selected = null;
    this.zoom = [];
    this.baseDepth = 0;
    $('zoom-out').disabled = true;
    hpc.status('loading…');
    let rows;
    if (this.view === 'top-down') {
      const j = await hpc.api('children', this.childParams(0));
      rows = j.children;
      this.totals = j.totals || null;
    } else if (this.view === 'bottom-up') {
      rows = (await hpc.api('bottom-up', { top: 5000 })).rows;
    } else if (this.structured()) {
      rows = (await hpc.api('structure', { depth: this.flatDepth + 1, top: 5000 })).rows;
    } else {
      rows = (await hpc.api('flat', { by: $('flat-by').value, top: 5000 })).rows;
    }
    if (seq !== this.loadSeq) return;
    const s = this.structured();
    $('flatten').hidden = $('unflatten').hidden = !s;
    $('unflatten').disabled = this.flatDepth === 0;
    $('hot-path').disabled = this.view === 'flat' && !s;
    this.roots = this.makeNodes(rows, 0, null);
    this.sortKids(this.roots);
    this.header();
    this.refresh();
    hpc.status('');
  },

  async expand(node) {
    if (!node.hasChildren) return;
    if (!node.children) {
      const rows = this.view === 'top-down'
        ? (await hpc.api('children', this.childParams(node.ctx))).children
        : this.structured() ? (await hpc.api('structure', { path: node.path, top: 5000 })).rows
        : (await hpc.api('bottom-up', { path: node.path, top: 5000 })).rows;
      node.children = this.makeNodes(rows, node.depth + 1, node);
      this.sortKids(node.children);
    }
    node.expanded = true;
    this.refresh();
  },
  collapse(node) { node.expanded = false; this.refresh(); },
  toggle(node) { return node.expanded ? this.collapse(node) : this.expand(node); },

  // Follows the hottest child while it holds at least `threshold` of its parent.
  async hotPath(from) {
    const c = this.columns[0];
    const threshold = Math.max(0, Math.min(100, Number($('hot-threshold').value) || 50)) / 100;
    let node = from || this.roots.reduce((a, b) => (this.value(b, c, false) > this.value(a, c, false) ? b : a), this.roots[0]);
    for (let steps = 0; node && steps < 500; ++steps) {
      if (!node.hasChildren) break;
      await this.expand(node);
      const best = node.children.reduce((a, b) => (!a || this.value(b, c, false) > this.value(a, c, false) ? b : a), null);
      if (!best || !(this.value(best, c, false) >= threshold * this.value(node, c, false)) || this.value(best, c, false) <= 0) break;
      node = best;
    }
    if (node) this.select(node, true);
  },

  // Expands the top-down tree along `path` (context ids from an entry point down) and selects
  // where it ends. An id not among the children shown (hidden by a filter, or above a zoomed
  // row) is passed over: the ids after it may be shown in its place.
  async reveal(path) {
    let list = this.roots, node = null;
    for (let i = 0; i < path.length; ++i) {
      const hit = list && list.find((n) => n.ctx === path[i]);
      if (!hit) continue;
      node = hit;
      if (i + 1 < path.length && node.hasChildren) {
        await this.expand(node);
        list = node.children;
      }
    }
    if (node) this.select(node, true);
    return node;
  },

  refresh() {
    // The expanded rows in tree order, with a stack of (list, next index): no recursion.
    const out = [], stack = [[this.roots, 0]];
    while (stack.length) {
      const top = stack[stack.length - 1];
      if (top[1] >= top[0].length) { stack.pop(); continue; }
      const n = top[0][top[1]++];
      out.push(n);
      if (n.expanded && n.children) stack.push([n.children, 0]);
    }
    this.visible = out;
    $('table-spacer').style.height = `${out.length * ROW}px`;
    this.render();
  },

  // Only the rows in the viewport exist in the DOM, so a million rows scroll smoothly.
  render() {
    const body = $('table-body');
    const first = Math.max(0, Math.floor(body.scrollTop / ROW) - 5);
    const last = Math.min(this.visible.length, Math.ceil((body.scrollTop + body.clientHeight) / ROW) + 5);
    for (const el of [...body.querySelectorAll('.row')]) el.remove();
    const frag = document.createDocumentFragment();
    for (let i = first; i < last; ++i) frag.append(this.rowElement(this.visible[i], i));
    body.append(frag);
  },

  rowElement(n, i) {
    const r = document.createElement('div');
    r.className = 'row' + (n === this.selected ? ' selected' : '') +
      (this.search && n.name.toLowerCase().includes(this.search) ? ' hit' : '');
    r.style.top = `${i * ROW}px`;
    r.dataset.index = i;
    r.setAttribute('role', 'treeitem');
    const name = document.createElement('div');
    name.className = 'name';
    name.style.paddingLeft = `${4 + 14 * (n.depth - this.baseDepth)}px`;
    const tw = document.createElement('span');
    tw.className = 'twist';
    tw.textContent = n.hasChildren ? (n.expanded ? '▾' : '▸') : '';
    tw.onclick = (ev) => { ev.stopPropagation(); this.toggle(n).catch(showError); };
    name.append(tw, document.createTextNode((this.view === 'bottom-up' && n.depth ? '← ' : '') + n.name));
    name.title = n.name;
    r.append(name);
    for (const c of this.columns)
      for (const exc of [false, true]) {
        const v = this.value(n, c, exc);
        const d = document.createElement('div');
        d.className = 'num';
        if (c.width) d.style.width = `${c.width}px`;
        d.textContent = hpc.fmt(v);
        const p = document.createElement('div');
        p.className = 'pct';
        if (c.delta) {  // the change against the baseline's value
          const b = this.value(n, { ...c, delta: false, baseline: true }, exc);
          p.textContent = !v || Number.isNaN(v) ? '' : b ? `${v > 0 ? '+' : ''}${(100 * v / Math.abs(b)).toFixed(1)}%` : 'new';
        } else {
          const total = c.derived || c.stat ? 0 : c.baseline ? hpc.info.baseline?.totals?.[c.metric] || 0 : this.metricTotal(c.metric);
          p.textContent = total && v ? `${(100 * v / total).toFixed(1)}%` : '';
        }
        r.append(d, p);
      }
    r.onclick = () => this.select(n);
    r.ondblclick = () => this.toggle(n).catch(showError);
    return r;
  },

  // hpcviewer's "Resize metric columns": each column as wide as its widest value among the
  // rows loaded (mode 'data'), or that and its label ('label'); '' back to the default.
  fitColumns(mode) {
    const probe = document.createElement('canvas').getContext('2d');
    const cell = document.querySelector('#table-body .num') || document.querySelector('#table-head .num');
    const style = getComputedStyle(cell || document.body);
    probe.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
    const nodes = [];
    const stack = [...(this.roots || [])];
    while (stack.length && nodes.length < 20000) {  // the rows loaded, expanded or not
      const n = stack.pop();
      nodes.push(n);
      if (n.children) stack.push(...n.children);
    }
    this.columns.forEach((c) => {
      if (!mode) { delete c.width; return; }
      let w = 0;
      for (const n of nodes)
        for (const exc of [false, true]) w = Math.max(w, probe.measureText(hpc.fmt(this.value(n, c, exc))).width);
      if (mode === 'label') {
        const head = getComputedStyle(document.querySelector('#table-head .num') || document.body);
        probe.font = `600 ${head.fontSize} ${head.fontFamily}`;
        w = Math.max(w, probe.measureText(`${c.label} (I)`).width + 14);
        probe.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
      }
      c.width = Math.ceil(Math.max(36, w + 10));  // the cell's padding
    });
    this.header();
    this.render();
  },

  select(n, scroll = false) {
    this.selected = n;
    const i = this.visible.indexOf(n);
    if (scroll && i >= 0) {
      const body = $('table-body');
      if (i * ROW < body.scrollTop || (i + 1) * ROW > body.scrollTop + body.clientHeight)
        body.scrollTop = Math.max(0, i * ROW - body.clientHeight / 2);
    }
    this.render();
    details(n).catch(showError);
  },

  key(ev) {
    if (!this.visible.length) return;
    let i = Math.max(0, this.visible.indexOf(this.selected));
    const n = this.visible[i];
    switch (ev.key) {
      case 'ArrowDown': i = Math.min(this.visible.length - 1, i + 1); break;
      case 'ArrowUp': i = Math.max(0, i - 1); break;
      case 'ArrowRight': if (n && !n.expanded) this.expand(n).catch(showError); return ev.preventDefault();
      case 'ArrowLeft':
        if (n && n.expanded) this.collapse(n);
        else if (n?.parent && this.visible.includes(n.parent)) this.select(n.parent, true);
        return ev.preventDefault();
      case 'Enter': if (n) this.toggle(n).catch(showError); return ev.preventDefault();
      default: return;
    }
    ev.preventDefault();
    this.select(this.visible[i], true);
  },
};

function showError(e) { hpc.status(String(e.message || e), true); }

// Bigger and smaller text (hpcviewer's), kept in this browser: the font size in pixels and
// the rows' height with it.
function textSize(step) {
  const saved = Number(localStorage.getItem('hpcviewer-font')) || 13;
  const px = Math.max(9, Math.min(22, saved + step));
  localStorage.setItem('hpcviewer-font', String(px));
  ROW = Math.round(px * 1.7);
  document.documentElement.style.setProperty('--font', `${px}px`);
  document.documentElement.style.setProperty('--row', `${ROW}px`);
  table.refresh();
}

// ---- The thread view (hpcviewer's): the top-down tree with the values of chosen execution
// contexts alone, summed; and the rows shown saved as CSV.
const threads = {
  list: null,  // [{index, label}] of the measured profiles
  async open() {
    if (!this.list) this.list = (await hpc.api('profiles')).profiles.filter((p) => !p.summary);
    const chosen = new Set(table.profiles || this.list.map((p) => p.index));
    const box = $('threads-list');
    box.textContent = '';
    for (const p of this.list) {
      const l = document.createElement('label');
      const c = document.createElement('input');
      c.type = 'checkbox';
      c.value = p.index;
      c.checked = chosen.has(p.index);
      l.append(c, document.createTextNode(` ${p.label || 'profile ' + p.index}`));
      box.append(l);
    }
    $('threads-filter').value = '';
    $('threads-dialog').hidden = false;
    $('threads-filter').focus();
  },
  filter(text) {
    const t = text.trim().toLowerCase();
    for (const l of $('threads-list').children) l.hidden = t !== '' && !l.textContent.toLowerCase().includes(t);
  },
  mark(on) {
    for (const l of $('threads-list').children) if (!l.hidden) l.firstChild.checked = on;
  },
  async apply() {
    const picked = [...$('threads-list').querySelectorAll('input:checked')].map((c) => Number(c.value));
    $('threads-dialog').hidden = true;
    this.set(picked.length && picked.length < this.list.length ? picked : null);
    if (table.view !== 'top-down') $('view-top-down').click();  // loads the tree
    else await table.load();
  },
  set(profiles) {
    table.profiles = profiles;
    table.totals = null;
    const b = $('threads-badge');
    b.hidden = !profiles;
    b.textContent = profiles ? `thread view: ${profiles.length} of ${this.list.length}` : '';
    if (profiles) {
      const x = document.createElement('span');
      x.className = 'x'; x.textContent = '×'; x.title = 'all execution contexts again';
      x.onclick = () => { this.set(null); table.load().catch(showError); };
      b.append(x);
    }
  },
};

// ---- hpcviewer's CCT filters: globs on context names, applied to the top-down tree by the
// server (children's `filter`), kept in this browser's storage across sessions.
const filters = {
  key: 'hpcviewer-cct-filters',
  list() {
    try {
      const v = JSON.parse(localStorage.getItem(this.key) || '[]');
      return Array.isArray(v) ? v.filter((f) => f && typeof f.pattern === 'string' && ['self', 'descendants', 'all'].includes(f.mode)) : [];
    } catch { return []; }
  },
  active() { return this.list().filter((f) => f.enabled !== false && f.pattern).map(({ pattern, mode }) => ({ pattern, mode })); },
  badge() {
    const n = this.active().length, b = $('filters-badge');
    b.hidden = n === 0;
    // Filters shape the top-down tree alone: said so where another view is shown.
    const elsewhere = table.view !== 'top-down';
    b.textContent = n ? `${n} filter${n > 1 ? 's' : ''}${elsewhere ? ' (top-down view only)' : ''}` : '';
    b.title = n ? 'the filters hide contexts in the top-down tree; the bottom-up and flat views show every context' : '';
  },
  row(f) {
    const d = document.createElement('div');
    d.className = 'filter-row';
    const on = document.createElement('input');
    on.type = 'checkbox'; on.checked = f.enabled !== false; on.title = 'enabled';
    const pat = document.createElement('input');
    pat.type = 'text'; pat.value = f.pattern || ''; pat.placeholder = 'MPI_*'; pat.size = 24;
    const mode = document.createElement('select');
    for (const m of ['self', 'descendants', 'all']) {
      const o = document.createElement('option');
      o.value = m; o.textContent = m; o.selected = f.mode === m;
      mode.append(o);
    }
    const x = document.createElement('button');
    x.textContent = '×'; x.title = 'remove';
    x.onclick = () => d.remove();
    d.append(on, pat, mode, x);
    $('filters-list').append(d);
  },
  open() {
    $('filters-list').textContent = '';
    for (const f of this.list()) this.row(f);
    if (!this.list().length) this.row({ pattern: '', mode: 'self' });
    $('filters-dialog').hidden = false;
  },
  async apply() {
    const v = [...$('filters-list').children].map((d) => {
      const [on, pat, mode] = d.children;
      return { pattern: pat.value.trim(), mode: mode.value, enabled: on.checked };
    }).filter((f) => f.pattern);
    localStorage.setItem(this.key, JSON.stringify(v));
    $('filters-dialog').hidden = true;
    this.badge();
    if (table.view !== 'top-down') $('view-top-down').click();
    else await table.load();
  },
};

function saveCsv() {
  const q = (v) => (/[",\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v);
  const head = ['depth', 'name'];
  for (const c of table.columns) head.push(`${c.label} (I)`, `${c.label} (E)`);
  const lines = [head.map(q).join(',')];
  for (const n of table.visible) {
    const row = [String(n.depth), q(n.name)];
    for (const c of table.columns) for (const exc of [false, true]) {
      const v = table.value(n, c, exc);
      row.push(v === undefined || Number.isNaN(v) ? '' : String(v));
    }
    lines.push(row.join(','));
  }
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([lines.join('\n') + '\n'], { type: 'text/csv' }));
  a.download = `${hpc.info.title || 'hpcviewer'}-${table.view}.csv`;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

// ---- Find: the contexts a call path query matches anywhere in the tree (/api/query). Plain
// text is a name to look for within names ("spin" is **/*spin*); text with a "/" or a ":" is
// a query as hpcreport --query reads it.
async function find(text) {
  text = text.trim();
  if (!text) return;
  const path = /[/:]/.test(text) ? text : `**/*${text}*`;
  const m = table.columns.find((c) => !c.derived && !c.stat && !c.baseline && !c.delta)?.metric ?? hpc.info.defaultMetric;
  const params = { path, metrics: String(m), top: 200 };
  if (table.profiles) params.profiles = table.profiles.join(',');  // the thread view's values
  const j = await hpc.api('query', params);
  const total = table.profiles ? table.metricTotal(m) : hpc.info.metrics[m]?.total || 0;
  const pct = (v) => (total ? `${(100 * v / total).toFixed(2)} %` : '');
  $('find-title').textContent = 'Contexts found: ';
  const qt = document.createElement('code');
  qt.textContent = path;
  $('find-title').append(qt);
  $('find-summary').textContent = `${j.total} contexts match, ${j.outermost} outermost (the others below one of them): ` +
    `${pct(j.outermostInclusive[0])} of ${hpc.info.metrics[m]?.name || 'the metric'} in them` +
    (j.rows.length < j.total ? `; the ${j.rows.length} hottest listed` : '');
  const list = $('find-list');
  list.textContent = '';
  const frag = document.createDocumentFragment();
  for (const r of j.rows) {
    const d = document.createElement('div');
    d.className = 'found' + (r.outermost ? '' : ' nested');
    d.title = r.outermost ? 'expand the tree to this context' : 'below another match; expand the tree to it';
    const p = document.createElement('span');
    p.className = 'pct';
    p.textContent = pct(r.inc[0]);
    // Its own name first, then where it is: the entry point and functions above it.
    const name = document.createElement('b');
    name.textContent = r.name;
    const where = document.createElement('span');
    where.className = 'where';
    // The nearest function first: "in spinsleep ← caller ← main ← main thread".
    const names = r.pathNames.split(' > ');
    if (names.length && names[names.length - 1] === r.name) names.pop();
    where.textContent = names.length ? `  in ${names.reverse().join(' ← ')}` : '';
    d.append(p, name, where);
    d.title = `${r.pathNames}\n${d.title}`;
    d.onclick = async () => {
      if (table.view !== 'top-down') {
        $('view-top-down').click();
        await table.pending;
      }
      await table.reveal(r.path);
    };
    frag.append(d);
  }
  list.append(frag);
  $('find-dialog').hidden = false;
}

// ---- Side pane: the context's path, its values across profiles, its source.
async function details(n) {
  const path = $('context-path');
  path.textContent = '';
  if (table.view === 'top-down' && n.ctx !== undefined) {
    const j = await hpc.api('context', { ctx: n.ctx });
    const frag = document.createDocumentFragment();  // one insertion, however deep the path
    for (const p of j.path) {
      const d = document.createElement('div');
      d.textContent = p.name;
      frag.append(d);
    }
    path.append(frag);
    await plot(n.ctx);
  } else {
    path.textContent = n.name;
  }
  await source(n.file, n.line);
}

// hpcviewer's graphs of the selected context's metric across the profiles: by profile, the
// values sorted, or a histogram of them (profiles without a value count as 0).
async function plot(ctx) {
  const m = table.columns.find((c) => !c.derived)?.metric ?? hpc.info.defaultMetric;
  const cv = $('plot'), g = cv.getContext('2d');
  g.clearRect(0, 0, cv.width, cv.height);
  if (hpc.info.profiles < 1) return;
  const j = await hpc.api('profile-values', { ctx, metric: m, scope: 'inc' });
  plot.last = { ctx, j };
  drawPlot(j);
}
// The dot under the cursor: its execution context ("RANK 1 THREAD 0", from /api/profiles)
// and value (hpcviewer's graph tooltips).
async function plotHover(ev) {
  const cv = $('plot'), rect = cv.getBoundingClientRect();
  const px = (ev.clientX - rect.left) * cv.width / rect.width, py = (ev.clientY - rect.top) * cv.height / rect.height;
  let best = null, d2 = 36;
  for (const d of drawPlot.dots || []) {
    const e = (d.x - px) ** 2 + (d.y - py) ** 2;
    if (e < d2) d2 = e, best = d;
  }
  const out = $('plot-hover');
  plotHover.best = best;
  if (!best) { out.textContent = ''; return; }
  if (!threads.list) threads.list = (await hpc.api('profiles')).profiles.filter((p) => !p.summary);
  const label = best.profile !== null ? (threads.list.find((p) => p.index === best.profile)?.label || `profile ${best.profile}`)
    : `#${best.rank} of the sorted values`;
  out.textContent = `${label}: ${hpc.fmt(best.v)}${best.profile !== null ? ' (click: its thread view)' : ''}`;
}

function drawPlot(j) {
  const cv = $('plot'), g = cv.getContext('2d'), kind = $('plot-kind').value;
  g.clearRect(0, 0, cv.width, cv.height);
  $('plot-stats').textContent = `min ${hpc.fmt(j.min)} · mean ${hpc.fmt(j.mean)} · max ${hpc.fmt(j.max)}`;
  const n = j.profiles;
  g.strokeStyle = '#999';
  g.beginPath(); g.moveTo(30, 10); g.lineTo(30, cv.height - 10); g.lineTo(cv.width - 10, cv.height - 10); g.stroke();
  g.fillStyle = '#2a63c7';
  if (kind === 'histogram') {
    // Ten bins from 0 to the largest value; the profiles without a value go in the first.
    const bins = new Array(10).fill(0), hi = j.max || 1;
    for (const [, v] of j.values) bins[Math.min(9, Math.floor(10 * v / hi))]++;
    bins[0] += n - j.values.length;
    const top = Math.max(...bins) || 1, w = (cv.width - 40) / 10;
    bins.forEach((b, i) => {
      const h = (cv.height - 20) * b / top;
      g.fillRect(30 + i * w + 1, cv.height - 10 - h, w - 2, h);
    });
    g.fillStyle = '#333';
    g.fillText(String(top), 2, 14);
    g.fillText(hpc.fmt(hi), cv.width - 40, cv.height - 1);
    cv.dataset.bins = bins.join(',');
    drawPlot.dots = [];
    return;
  }
  const hi = j.max || 1;
  const x = (p) => 30 + (cv.width - 40) * (n > 1 ? (p - 1) / (n - 1) : 0.5);
  const y = (v) => cv.height - 10 - (cv.height - 20) * (v / hi);
  let points = j.values;
  if (kind === 'sorted') {  // every profile, its value or 0, smallest first
    const all = new Array(n).fill(0);
    j.values.forEach(([, v], i) => { all[n - j.values.length + i] = v; });
    all.sort((a, b) => a - b);
    points = all.map((v, i) => [i + 1, v]);
  }
  for (const [p, v] of points) g.fillRect(x(p) - 1.5, y(v) - 1.5, 3, 3);
  // Where each dot is, for the hover: its profile (by profile the profile.db row; sorted, the
  // value's place only) and value.
  drawPlot.dots = points.map(([p, v]) => ({ x: x(p), y: y(v), profile: kind === 'plot' ? p : null, v, rank: p }));
  g.strokeStyle = '#d0453a';
  g.setLineDash([4, 3]);
  g.beginPath(); g.moveTo(30, y(j.mean)); g.lineTo(cv.width - 10, y(j.mean)); g.stroke();
  g.setLineDash([]);
  g.fillStyle = '#333';
  g.fillText(hpc.fmt(hi), 2, 14);
  delete cv.dataset.bins;
}

async function source(file, line) {
  const pre = $('source');
  pre.textContent = '';
  $('source-name').textContent = '';
  if (file === undefined) return;
  $('source-name').textContent = `${(hpc.info.fileNames?.[file]) || 'file ' + file}:${line}`;
  let j;
  try { j = await hpc.api('source', { file }); } catch (e) { pre.textContent = `(${e.message})`; return; }
  $('source-name').textContent = `${j.path.split('/').pop()}:${line}`;
  const lines = j.text.split('\n');
  lines.forEach((t, k) => {
    const s = document.createElement('span');
    s.textContent = `${String(k + 1).padStart(5)}  ${t}\n`;
    if (k + 1 === line) s.className = 'hl';
    pre.append(s);
  });
  const hl = pre.querySelector('.hl');
  if (hl) pre.scrollTop = hl.offsetTop - pre.clientHeight / 2;
}

// ---- Where the time went: kinds of work, the GPU's operations and the verdict (/api/overview).
async function showOverview() {
  const j = await hpc.api('overview', { metric: hpc.info.defaultMetric });
  const t = $('overview');
  t.textContent = '';
  $('overview-metric').textContent = j.metric === null ? '' : `(${hpc.info.metrics[j.metric]?.name ?? ''})`;
  const row = (name, v, share, title) => {
    const tr = document.createElement('tr');
    for (const [text, cls] of [[name, ''], [hpc.fmt(v), 'num'], [share, 'num']]) {
      const td = document.createElement('td');
      td.textContent = text;
      if (cls) td.className = cls;
      tr.append(td);
    }
    if (title) tr.title = title;
    t.append(tr);
  };
  for (const k of j.kinds) {
    if (k.value === 0 && k.key !== 'compute') continue;
    const where = k.where.map((w) => `${w.name}: ${hpc.fmt(w.value)}`).join('\n');
    row(k.name, k.value, j.total ? `${(100 * k.value / j.total).toFixed(1)}%` : '', where);
  }
  for (const g of j.gpu) row(`GPU: ${g.name}`, g.value, 's');
  const sp = j.mpiSpread;
  if (sp) row(`MPI per profile: ${(100 * sp.min).toFixed(1)}% to ${(100 * sp.max).toFixed(1)}%`, sp.profiles, 'profiles',
    `lowest: ${sp.minProfile}\nhighest: ${sp.maxProfile}`);
  $('verdict').textContent = j.verdict ? `${j.verdict}: ${j.reason}` : '';
}

// ---- Wiring.
function showPage(page) {
  for (const b of document.querySelectorAll('header [data-page]')) b.classList.toggle('active', b.dataset.page === page);
  $('page-profile').hidden = page !== 'profile';
  $('page-trace').hidden = page !== 'trace';
  if (page === 'trace') window.traceView?.show().catch(showError);
}

async function main() {
  hpc.info = await hpc.api('info');
  document.title = `hpcviewer: ${hpc.info.title}`;
  $('title').textContent = hpc.info.title || 'hpcviewer';
  const dm = hpc.info.defaultMetric;
  table.columns = [{ metric: dm, label: hpc.info.metrics[dm]?.name ?? 'metric' }];
  const bl = hpc.info.baseline;  // hpcserver --compare: the baseline's value and the change
  if (bl && bl.metrics[dm] >= 0)
    table.columns.push({ metric: dm, label: `base $${dm}`, baseline: true },
      { metric: dm, label: `Δ $${dm}`, delta: true });
  if (bl) {
    $('baseline-badge').hidden = false;
    $('baseline-badge').textContent = `against ${bl.title || bl.dir}`;
    $('baseline-badge').title = `baseline database: ${bl.dir}; the profile views show its values beside each row`;
  }
  hpc.info.metrics.forEach((m, i) => {
    for (const [value, text] of [[`${i}`, `$${i} ${m.name}`], ...(bl && bl.metrics[i] >= 0
      ? [[`b${i}`, `baseline $${i} ${m.name}`], [`d${i}`, `change $${i} ${m.name}`]] : []),
      ...(m.stats || []).map((st) => [`s${i}:${st}`, `$${i} ${m.name} (${st} over the profiles)`])]) {
      const o = document.createElement('option');
      o.value = value;
      o.textContent = text;
      $('metric-add').append(o);
    }
  });
  $('tab-trace').disabled = !hpc.info.hasTrace;
  filters.badge();
  showOverview().catch(showError);
  await table.load();
}

document.addEventListener('DOMContentLoaded', () => {
  for (const b of document.querySelectorAll('header [data-page]')) b.onclick = () => showPage(b.dataset.page);
  for (const b of document.querySelectorAll('.views button')) b.onclick = () => {
    for (const x of document.querySelectorAll('.views button')) x.classList.toggle('active', x === b);
    table.view = b.dataset.view;
    if (table.view !== 'top-down' && table.profiles) threads.set(null);  // the thread view is a top-down tree
    // Bottom-up and flat lists rank by self cost, the trees (and the static structure) by inclusive.
    table.sortExc = table.view !== 'top-down' && !table.structured();
    $('flat-by').hidden = table.view !== 'flat';
    filters.badge();
    table.pending = table.load();
    table.pending.catch(showError);
  };
  $('flat-by').onchange = () => {
    table.sortExc = !table.structured();
    table.flatDepth = 0;
    table.load().catch(showError);
  };
  $('flatten').onclick = () => {
    if (table.flatDepth >= 7) return;
    table.flatDepth += 1;
    // Refused (too many rows for the server): the view stays as it was.
    table.load().catch((e) => { table.flatDepth -= 1; $('unflatten').disabled = table.flatDepth === 0; showError(e); });
  };
  $('unflatten').onclick = () => { table.flatDepth = Math.max(0, table.flatDepth - 1); table.load().catch(showError); };
  $('threads').onclick = () => threads.open().catch(showError);
  $('threads-filter').addEventListener('input', (ev) => threads.filter(ev.target.value));
  $('threads-all').onclick = () => threads.mark(true);
  $('threads-none').onclick = () => threads.mark(false);
  $('threads-ok').onclick = () => threads.apply().catch(showError);
  $('threads-cancel').onclick = () => { $('threads-dialog').hidden = true; };
  $('csv').onclick = saveCsv;
  $('fit-columns').onchange = () => table.fitColumns($('fit-columns').value);
  $('text-bigger').onclick = () => textSize(1);
  $('text-smaller').onclick = () => textSize(-1);
  textSize(0);
  $('filters').onclick = () => filters.open();
  $('filters-add').onclick = () => filters.row({ pattern: '', mode: 'self' });
  $('filters-ok').onclick = () => filters.apply().catch(showError);
  $('filters-cancel').onclick = () => { $('filters-dialog').hidden = true; };
  $('plot-kind').onchange = () => { if (plot.last) drawPlot(plot.last.j); };
  $('plot').addEventListener('mousemove', (ev) => plotHover(ev).catch(showError));
  // A dot's click shows that execution context alone: the thread view (hpcviewer's graph menu).
  $('plot').addEventListener('click', (ev) => {
    const d = plotHover.best;
    if (!d || d.profile === null || !threads.list) return;
    threads.set([d.profile]);
    if (table.view !== 'top-down') $('view-top-down').click();
    else table.load().catch(showError);
  });
  $('zoom-in').onclick = () => table.zoomIn();
  $('zoom-out').onclick = () => table.zoomOut();
  $('hot-path').onclick = () => table.hotPath(table.selected).catch(showError);
  $('table-body').addEventListener('scroll', () => {
    $('table-head').scrollLeft = $('table-body').scrollLeft;
    table.render();
  });
  $('table-body').addEventListener('keydown', (ev) => table.key(ev));
  $('find').onclick = () => find($('search').value).catch(showError);
  $('search').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') { ev.preventDefault(); find($('search').value).catch(showError); }
  });
  $('find-close').onclick = () => { $('find-dialog').hidden = true; };
  $('search').addEventListener('input', (ev) => {
    table.search = ev.target.value.trim().toLowerCase();
    const hit = table.search && table.visible.find((n) => n.name.toLowerCase().includes(table.search));
    if (hit) table.select(hit, true); else table.render();
  });
  $('metric-add').onchange = (ev) => {
    if (ev.target.value === '') return;
    const v = ev.target.value;
    if (v[0] === 's') {  // a statistic over the profiles: s<metric>:<stat>
      const [mi, st] = v.slice(1).split(':');
      table.columns.push({ metric: Number(mi), label: `$${mi} ${st}`, stat: st });
      ev.target.value = '';
      if (table.view === 'top-down') table.load().catch(showError); else table.resort();
      return;
    }
    const m = Number(v.replace(/^[bd]/, ''));
    const kind = v[0] === 'b' ? 'baseline' : v[0] === 'd' ? 'change' : '';
    table.columns.push({ metric: m, label: kind === 'baseline' ? `base $${m}` : kind === 'change' ? `Δ $${m}` : hpc.info.metrics[m].name,
      baseline: kind === 'baseline', delta: kind === 'change' });
    ev.target.value = '';
    table.resort();
  };
  $('formula-add').onclick = () => {
    const text = $('formula').value.trim();
    if (!text) return;
    try {
      const d = compileFormula(text);
      for (const k of d.refs) if (!hpc.info.metrics[k]) throw new Error(`no metric $${k}`);
      table.columns.push({ metric: -1, label: text, derived: d });
      table.resort();
      hpc.status('');
    } catch (e) { hpc.status(`formula: ${e.message}`, true); }
  };
  document.addEventListener('keydown', (ev) => {
    // Escape closes the dialog open (Find, filters, threads), without applying anything.
    if (ev.key === 'Escape') {
      const open = [...document.querySelectorAll('.dialog')].find((d) => !d.hidden);
      if (open) { ev.preventDefault(); open.hidden = true; return; }
    }
    if (ev.target.tagName === 'INPUT') return;
    if (ev.key === '/') { ev.preventDefault(); $('search').focus(); }
    if (ev.key === 'h' && !$('page-profile').hidden) table.hotPath(table.selected).catch(showError);
  });
  window.addEventListener('resize', () => table.render());
  main().catch(showError);
});
