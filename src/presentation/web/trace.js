// hpcviewer's trace view: one row per trace line, time across, a colour per function at
// the chosen call depth (white: idle). Each screen is one /api/trace request at the
// canvas's pixel width; hovering asks /api/trace-sample for the call stack there.
'use strict';

window.traceView = (() => {
  const cv = () => document.getElementById('trace-canvas');
  const st = { t0: 0, t1: 0, min: 0, max: 0, lines: 0, data: null, names: {}, loaded: false, seq: 0, hoverSeq: 0 };

  function colour(k) {
    if (k === -1) return '#ffffff';
    if (k < 0) return '#bbbbbb';
    const h = (k * 137.508) % 360;  // golden-angle hues: neighbours differ
    return `hsl(${h.toFixed(1)}, ${55 + (k % 3) * 12}%, ${48 + (k % 4) * 7}%)`;
  }
  // Timestamps are nanoseconds near 2^60: BigInt keeps them exact in the URL.
  const big = (x) => BigInt(Math.round(x));

  async function fetchScreen() {
    const c = cv();
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.max(1, Math.floor(c.clientWidth * dpr));
    c.height = Math.max(1, Math.floor(c.clientHeight * dpr));
    const seq = ++st.seq;
    hpc.status('trace…');
    const j = await hpc.api('trace', {
      t0: st.t0.toString(), t1: st.t1.toString(), p0: 0, p1: st.lines,
      rows: Math.min(st.lines, c.height, 4096), width: Math.min(c.width, 8192),
      depth: Number(document.getElementById('trace-depth').value) || 0,
    });
    if (seq !== st.seq) return;  // a newer screen was asked for
    st.data = j;
    Object.assign(st.names, j.functions);
    draw();
    hpc.status('');
  }

  function draw() {
    const c = cv(), g = c.getContext('2d'), j = st.data;
    g.fillStyle = '#fff';
    g.fillRect(0, 0, c.width, c.height);
    if (!j) return;
    const rowH = c.height / j.lines.length, sx = c.width / j.width;
    const share = new Map();
    j.lines.forEach((line, r) => {
      let x = 0;
      for (const [k, n] of line.runs) {
        if (k !== -1) {
          g.fillStyle = colour(k);
          g.fillRect(x * sx, r * rowH, n * sx + 0.5, Math.max(1, rowH - (rowH > 4 ? 1 : 0)));
        }
        share.set(k, (share.get(k) || 0) + n);
        x += n;
      }
    });
    const total = j.lines.length * j.width;
    const rows = [...share.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30);
    const tb = document.getElementById('trace-stats');
    tb.innerHTML = '';
    for (const [k, n] of rows) {
      const tr = tb.insertRow();
      const sw = document.createElement('span');
      sw.className = 'swatch';
      sw.style.background = colour(k);
      tr.insertCell().append(sw, document.createTextNode(k === -1 ? '(idle)' : k === -2 ? '(unknown context)' : k === -3 ? '(no function)' : st.names[k] ?? `function ${k}`));
      tr.insertCell().textContent = `${(100 * n / total).toFixed(1)}%`;
    }
    const secs = (Number(st.t1 - st.t0) / 1e9).toPrecision(4);
    document.getElementById('trace-range').textContent =
      `${j.lines.length} of ${j.lineCount} lines · ${secs} s from +${(Number(st.t0 - st.min) / 1e9).toFixed(4)} s`;
  }

  function zoom(f, at = 0.5) {
    const span = Number(st.t1 - st.t0);
    const ns = Math.max(1000, Math.min(Number(st.max - st.min) + 1, span * f));
    let t0 = st.t0 + big((span - ns) * at);
    t0 = t0 < st.min ? st.min : t0;
    let t1 = t0 + big(ns);
    if (t1 > st.max + 1n) { t1 = st.max + 1n; t0 = t1 - big(ns) < st.min ? st.min : t1 - big(ns); }
    st.t0 = t0, st.t1 = t1;
    fetchScreen().catch(showError);
  }
  function pan(f) {
    const d = big(Number(st.t1 - st.t0) * f);
    let t0 = st.t0 + d, t1 = st.t1 + d;
    if (t0 < st.min) t1 += st.min - t0, t0 = st.min;
    if (t1 > st.max + 1n) t0 -= t1 - st.max - 1n, t1 = st.max + 1n;
    st.t0 = t0 < st.min ? st.min : t0, st.t1 = t1;
    fetchScreen().catch(showError);
  }

  async function hover(ev) {
    const j = st.data;
    if (!j) return;
    const c = cv(), rect = c.getBoundingClientRect();
    const fx = (ev.clientX - rect.left) / rect.width, fy = (ev.clientY - rect.top) / rect.height;
    const row = j.lines[Math.min(j.lines.length - 1, Math.max(0, Math.floor(fy * j.lines.length)))];
    if (!row) return;
    const t = st.t0 + big(Number(st.t1 - st.t0) * Math.min(0.999999, Math.max(0, fx)));
    const seq = ++st.hoverSeq;
    const s = await hpc.api('trace-sample', { line: row.line, t: t.toString() });
    if (seq !== st.hoverSeq) return;
    const ol = document.getElementById('trace-stack');
    ol.innerHTML = '';
    ol.dataset.line = row.line;
    if (!s.found || !s.stack.length) {
      const li = document.createElement('li');
      li.textContent = s.found ? `(context ${s.ctx} not in meta.db)` : '(idle)';
      ol.append(li);
      return;
    }
    for (const f of s.stack) {
      const li = document.createElement('li');
      li.textContent = f.name;
      ol.append(li);
    }
  }

  let drag = null;
  async function show() {
    if (!st.loaded) {
      const j = await hpc.api('trace', { width: 1, rows: 1 });
      st.min = BigInt(j.minTime), st.max = BigInt(j.maxTime), st.lines = j.lineCount;
      st.t0 = st.min, st.t1 = st.max + 1n;
      st.loaded = true;
      const c = cv();
      c.addEventListener('mousemove', (ev) => {
        if (drag) {
          const dx = (ev.clientX - drag.x) / c.getBoundingClientRect().width;
          if (Math.abs(dx) > 0.01) { drag.x = ev.clientX; pan(-dx); }
          return;
        }
        hover(ev).catch(showError);
      });
      c.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX }; });
      window.addEventListener('mouseup', () => { drag = null; });
      c.addEventListener('wheel', (ev) => {
        ev.preventDefault();
        const rect = c.getBoundingClientRect();
        zoom(ev.deltaY < 0 ? 0.5 : 2, (ev.clientX - rect.left) / rect.width);
      }, { passive: false });
      document.getElementById('trace-zoom-in').onclick = () => zoom(0.5);
      document.getElementById('trace-zoom-out').onclick = () => zoom(2);
      document.getElementById('trace-left').onclick = () => pan(-0.25);
      document.getElementById('trace-right').onclick = () => pan(0.25);
      document.getElementById('trace-reset').onclick = () => { st.t0 = st.min; st.t1 = st.max + 1n; fetchScreen().catch(showError); };
      document.getElementById('trace-depth').onchange = () => fetchScreen().catch(showError);
      document.addEventListener('keydown', (ev) => {
        if (document.getElementById('page-trace').hidden || ev.target.tagName === 'INPUT') return;
        if (ev.key === '+' || ev.key === '=') zoom(0.5);
        else if (ev.key === '-') zoom(2);
        else if (ev.key === 'ArrowLeft') pan(-0.25);
        else if (ev.key === 'ArrowRight') pan(0.25);
        else if (ev.key === '0') document.getElementById('trace-reset').click();
      });
      window.addEventListener('resize', () => { if (!document.getElementById('page-trace').hidden) fetchScreen().catch(showError); });
    }
    await fetchScreen();
  }
  return { show };
})();
