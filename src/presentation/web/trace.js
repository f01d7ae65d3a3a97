// hpcviewer's trace view: one row per trace line, time across, a colour per function at
// the chosen call depth (white: idle). A screen is fetched as bands of rows from
// /api/trace?encoding=binary at the canvas's pixel width, several in flight, and each band
// is painted as it arrives (pixels written into ImageData: work proportional to pixels).
// Hovering asks /api/trace-sample for the call stack; the "GPU idle blame" tab asks
// /api/trace-blame for the CPU functions running while every GPU stream is idle. Time and
// trace lines zoom and pan apart (hpcviewer's horizontal and vertical zoom), and every view
// change can be undone and redone. A click places the crosshair (a time on a trace line): the
// depth view below shows that line's call stacks over the time shown (/api/trace-depth), and
// clicking it moves the crosshair and picks the depth; the summary shows each time's share of
// every function among the lines shown; the mini map shows where the view lies in the whole
// trace; a view (time range, lines, depth, crosshair) is saved to a file and loaded again.
'use strict';

window.traceView = (() => {
  const cv = () => document.getElementById('trace-canvas');
  const $t = (id) => document.getElementById(id);
  const st = { t0: 0, t1: 0, min: 0, max: 0, lines: 0, rows: [], nrows: 0, width: 0, names: {}, loaded: false,
    seq: 0, hoverSeq: 0, blameSeq: 0, side: 'stats', share: new Map(), painted: 0,
    l0: 0, l1: 0,           // the trace lines shown, [l0, l1) (zoomed in the process dimension)
    undo: [], redo: [],     // earlier and undone views: {t0, t1, l0, l1}
    keys: null,             // the key at each pixel of each row shown (the summary's input)
    cross: null,            // the crosshair: {t (BigInt ns), line (trace line)}
    all: 0,                 // trace lines in trace.db; st.lines counts those chosen (all of them unless chosen)
    chosen: null,           // hpcviewer's filter of execution contexts: the trace lines shown, or null: all
    lineInfo: null,         // [{line, profile, label, gpu}] (/api/trace-lines), once asked
    lower: 'depth', depthSeq: 0, depthRows: null };
  const BAND = 128, IN_FLIGHT = 4;

  function hue(k) { return (k * 137.508) % 360; }  // golden-angle hues: neighbours differ
  function colour(k) {
    if (k === -1) return '#ffffff';
    if (k < 0) return '#bbbbbb';
    return `hsl(${hue(k).toFixed(1)}, ${55 + (k % 3) * 12}%, ${48 + (k % 4) * 7}%)`;
  }
  // The same colour as a little-endian RGBA word for ImageData.
  const rgbaCache = new Map();
  function rgba(k) {
    let v = rgbaCache.get(k);
    if (v !== undefined) return v;
    let r = 255, g = 255, b = 255;
    if (k < -1) r = g = b = 0xbb;
    else if (k >= 0) {
      const h = hue(k), s = (55 + (k % 3) * 12) / 100, l = (48 + (k % 4) * 7) / 100;
      const a = s * Math.min(l, 1 - l);
      const f = (n) => { const q = (n + h / 30) % 12; return Math.round(255 * (l - a * Math.max(-1, Math.min(q - 3, 9 - q, 1)))); };
      r = f(0), g = f(8), b = f(4);
    }
    v = ((255 << 24) | (b << 16) | (g << 8) | r) >>> 0;
    rgbaCache.set(k, v);
    return v;
  }
  // Trace lines as the API takes them: "0-3,7,9-12" (in the order given).
  function ranges(lines) {
    const out = [];
    for (let i = 0; i < lines.length;) {
      let j = i;
      while (j + 1 < lines.length && lines[j + 1] === lines[j] + 1) ++j;
      out.push(j > i ? `${lines[i]}-${lines[j]}` : `${lines[i]}`);
      i = j + 1;
    }
    return out.join(',');
  }
  // Timestamps are nanoseconds near 2^60: BigInt keeps them exact in the URL.
  const big = (x) => BigInt(Math.round(x));

  // One band: rows [r0, r1) of the screen, trace lines [p0, p1).
  async function fetchBand(seq, q, r0, r1, p0, p1) {
    const r = await fetch(`/api/trace?${new URLSearchParams({ ...q, p0, p1, rows: r1 - r0, encoding: 'binary' })}`,
      { headers: { 'X-HPC-Token': token } });
    const buf = await r.arrayBuffer();
    if (!r.ok) throw new Error(JSON.parse(new TextDecoder().decode(buf)).error || `HTTP ${r.status}`);
    if (seq !== st.seq) return;
    // Frames of rows, each painted in turn (the server writes them as it computes them).
    decodeTrace(buf, (head, dv, off) => {
      Object.assign(st.names, head.functions);
      paintBand(head, dv, off, r0);
      r0 += head.lines.length;
    });
  }

  // A binary trace reply: frames of (u32 LE length, JSON header, runs as (i32 key, u32
  // pixels) LE pairs for the header's lines). frame(head, dataView, offset of its runs) is
  // called per frame; returns the first header, whose minTime and maxTime are made exact
  // BigInts from its text (JSON numbers lose bits near 2^60).
  function decodeTrace(buf, frame) {
    const dv = new DataView(buf);
    let first = null;
    for (let off = 0; off < buf.byteLength;) {
      const hl = dv.getUint32(off, true);
      const text = new TextDecoder().decode(new Uint8Array(buf, off + 4, hl));
      const head = JSON.parse(text);
      if (!first) {
        first = head;
        for (const k of ['minTime', 'maxTime']) head[k] = BigInt(text.match(new RegExp(`"${k}":(\\d+)`))[1]);
      }
      off += 4 + hl;
      if (frame) frame(head, dv, off);
      for (const l of head.lines) off += 8 * l.runs;
    }
    return first;
  }

  function paintBand(head, dv, off, r0) {
    const c = cv(), g = c.getContext('2d'), W = st.width, H = c.height, n = st.nrows;
    const rowPx = new Uint32Array(W);
    const lines = head.lines;
    const y0 = Math.floor(r0 * H / n), y1 = Math.floor((r0 + lines.length) * H / n);
    const img = y1 > y0 ? g.createImageData(W, y1 - y0) : null;
    const px = img ? new Uint32Array(img.data.buffer) : null;
    const gap = H / n > 4;
    lines.forEach((line, i) => {
      const r = r0 + i;
      st.rows[r] = line.line;
      let x = 0;
      for (let j = 0; j < line.runs; ++j, off += 8) {
        const k = dv.getInt32(off, true), m = dv.getUint32(off + 4, true);
        rowPx.fill(rgba(k), x, x + m);
        if (st.keys) st.keys.fill(k, r * W + x, r * W + x + m);
        st.share.set(k, (st.share.get(k) || 0) + m);
        x += m;
      }
      if (!px) return;
      const ya = Math.max(y0, Math.floor(r * H / n)), yb = Math.min(y1, Math.floor((r + 1) * H / n));
      for (let y = ya; y < yb; ++y) {
        if (gap && y === yb - 1 && yb - ya > 1) px.fill(0xffffffff, (y - y0) * W, (y - y0 + 1) * W);
        else px.set(rowPx, (y - y0) * W);
      }
    });
    if (img) g.putImageData(img, 0, y0);
    st.painted += lines.length;
    if (st.painted >= st.nrows) finish();
  }

  function finish() {
    const total = st.nrows * st.width;
    const rows = [...st.share.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30);
    const tb = $t('trace-stats');
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
    const part = st.l1 - st.l0 < st.lines ? ` (lines ${st.l0 + 1}-${st.l1})` : '';
    const of = st.chosen ? ` chosen (of ${st.all})` : '';
    $t('trace-range').textContent =
      `${st.nrows} of ${st.lines} lines${of}${part} · ${secs} s from +${(Number(st.t0 - st.min) / 1e9).toFixed(4)} s`;
    $t('trace-undo').disabled = st.undo.length === 0;
    $t('trace-redo').disabled = st.redo.length === 0;
    cv().dataset.painted = String(st.seq);
    hpc.status('');
    drawOverlay();
    drawMinimap();
    lowerView().catch(showError);
  }

  // ---- The crosshair, on the trace and in the depth view.
  const depthNow = () => Number($t('trace-depth').value) || 0;
  function crossX(width) {
    if (!st.cross || st.cross.t < st.t0 || st.cross.t >= st.t1) return null;
    return (Number(st.cross.t - st.t0) + 0.5) / Number(st.t1 - st.t0) * width;
  }
  function drawOverlay() {
    const o = $t('trace-overlay'), c = cv();
    o.width = c.width, o.height = c.height;
    const g = o.getContext('2d');
    g.clearRect(0, 0, o.width, o.height);
    const x = crossX(o.width);
    const r = st.cross ? st.rows.indexOf(st.cross.line) : -1;
    if (x === null && r < 0) return;
    g.lineWidth = 3; g.strokeStyle = 'rgba(0,0,0,0.6)';
    const line = (x0, y0, x1, y1) => { g.beginPath(); g.moveTo(x0, y0); g.lineTo(x1, y1); g.stroke(); };
    const y = r >= 0 ? (r + 0.5) * o.height / st.nrows : null;
    for (const [w, colour] of [[3, 'rgba(0,0,0,0.6)'], [1, '#ffffff']]) {
      g.lineWidth = w; g.strokeStyle = colour;
      if (x !== null) line(x, 0, x, o.height);
      if (y !== null) line(0, y, o.width, y);
    }
  }
  async function setCross(t, line) {
    st.cross = { t, line };
    const secs = (Number(t - st.min) / 1e9).toFixed(6);
    $t('trace-crosshair').textContent = `crosshair: line ${line + 1} at +${secs} s, depth ${depthNow()}`;
    drawOverlay();
    await Promise.all([stackAt(line, t), lowerView()]);
  }

  // ---- Below the trace: the depth view of the crosshair's line, or the summary.
  async function lowerView() {
    const dc = $t('trace-depth-canvas'), sc = $t('trace-summary-canvas');
    dc.hidden = st.lower !== 'depth';
    sc.hidden = st.lower !== 'summary';
    if (st.lower === 'summary') return drawSummary();
    return fetchDepth();
  }
  async function fetchDepth() {
    const c = $t('trace-depth-canvas');
    c.width = st.width || 1;
    c.height = Math.max(1, Math.floor(c.clientHeight * (window.devicePixelRatio || 1)));
    const g = c.getContext('2d');
    g.fillStyle = '#fff';
    g.fillRect(0, 0, c.width, c.height);
    if (!st.cross) return;
    const seq = ++st.depthSeq;
    const j = await hpc.api('trace-depth', { line: st.cross.line, t0: st.t0.toString(), t1: st.t1.toString(),
      width: c.width, depths: 128 });
    if (seq !== st.depthSeq) return;
    Object.assign(st.names, j.functions);
    st.depthRows = j.depths;
    const n = Math.max(1, j.depths.length), h = c.height / n;
    const img = g.createImageData(c.width, c.height), px = new Uint32Array(img.data.buffer);
    px.fill(0xffffffff);
    j.depths.forEach((runs, d) => {
      const y0 = Math.floor(d * h), y1 = Math.max(y0 + 1, Math.floor((d + 1) * h) - (h > 4 ? 1 : 0));
      let x = 0;
      for (const [k, m] of runs) {
        if (k !== -1) for (let y = y0; y < y1; ++y) px.fill(rgba(k), y * c.width + x, y * c.width + x + m);
        x += m;
      }
    });
    g.putImageData(img, 0, 0);
    // Its own crosshair: the time and the depth shown above.
    const x = crossX(c.width), d = depthNow();
    g.strokeStyle = '#000';
    g.lineWidth = 1;
    if (x !== null) { g.beginPath(); g.moveTo(x, 0); g.lineTo(x, c.height); g.stroke(); }
    if (d < n) g.strokeRect(0.5, Math.floor(d * h) + 0.5, c.width - 1, Math.max(1, h - 1));
    c.dataset.line = String(st.cross.line);
    c.dataset.rows = String(j.depths.length);
    c.dataset.done = String(seq);
  }
  // Each pixel column: the shares of the keys of the rows shown, stacked (hpcviewer's summary view).
  function drawSummary() {
    const c = $t('trace-summary-canvas');
    const W = st.width || 1, n = st.nrows;
    c.width = W;
    c.height = Math.max(1, Math.floor(c.clientHeight * (window.devicePixelRatio || 1)));
    const g = c.getContext('2d');
    const img = g.createImageData(W, c.height), px = new Uint32Array(img.data.buffer);
    px.fill(0xffffffff);
    if (st.keys && n) {
      const count = new Map();
      for (let x = 0; x < W; ++x) {
        count.clear();
        for (let r = 0; r < n; ++r) { const k = st.keys[r * W + x]; count.set(k, (count.get(k) || 0) + 1); }
        let y = c.height;
        for (const k of [...count.keys()].sort((a, b) => a - b)) {
          const top = Math.round(y - count.get(k) * c.height / n);
          if (k !== -1) for (let yy = Math.max(0, top); yy < y; ++yy) px[yy * W + x] = rgba(k);
          y = top;
        }
      }
    }
    g.putImageData(img, 0, 0);
    c.dataset.painted = String(st.seq);
  }

  // ---- The mini map: the whole trace, and where the view lies in it.
  function drawMinimap() {
    const c = $t('trace-minimap'), g = c.getContext('2d');
    g.fillStyle = '#eee';
    g.fillRect(0, 0, c.width, c.height);
    const span = Number(st.max - st.min) + 1;
    const x0 = Number(st.t0 - st.min) / span * c.width, x1 = Number(st.t1 - st.min) / span * c.width;
    const y0 = st.l0 / st.lines * c.height, y1 = st.l1 / st.lines * c.height;
    g.fillStyle = 'rgba(42,99,199,0.35)';
    g.fillRect(x0, y0, Math.max(2, x1 - x0), Math.max(2, y1 - y0));
    g.strokeStyle = '#2a63c7';
    g.strokeRect(x0 + 0.5, y0 + 0.5, Math.max(2, x1 - x0) - 1, Math.max(2, y1 - y0) - 1);
    c.dataset.view = `${(x0 / c.width).toFixed(4)},${((x1 - x0) / c.width).toFixed(4)},${st.l0},${st.l1}`;
  }
  function minimapClick(ev) {
    const c = $t('trace-minimap'), rect = c.getBoundingClientRect();
    if (c.dataset.dragged) { delete c.dataset.dragged; return; }  // the end of a drag
    const fx = (ev.clientX - rect.left) / rect.width, fy = (ev.clientY - rect.top) / rect.height;
    const span = st.t1 - st.t0, whole = st.max + 1n - st.min;
    let t0 = st.min + big(Number(whole) * fx) - span / 2n;
    if (t0 < st.min) t0 = st.min;
    if (t0 + span > st.max + 1n) t0 = st.max + 1n - span;
    const n = st.l1 - st.l0;
    const l0 = Math.max(0, Math.min(st.lines - n, Math.round(fy * st.lines - n / 2)));
    if (t0 === st.t0 && l0 === st.l0) return;
    remember();
    st.t0 = t0, st.t1 = t0 + span, st.l0 = l0, st.l1 = l0 + n;
    fetchScreen().catch(showError);
  }

  // ---- hpcviewer's filter of execution contexts: the trace lines shown.
  function setChosen(lines, redraw = true) {
    st.chosen = lines && lines.length && lines.length < st.all ? [...lines].sort((a, b) => a - b) : null;
    st.lines = st.chosen ? st.chosen.length : st.all;
    st.l0 = 0, st.l1 = st.lines;
    const b = $t('trace-lines-badge');
    b.hidden = !st.chosen;
    b.textContent = st.chosen ? `${st.chosen.length} of ${st.all} lines` : '';
    if (redraw) fetchScreen().catch(showError);
  }
  async function chooseLines() {
    if (!st.lineInfo) st.lineInfo = (await hpc.api('trace-lines')).lines;
    const box = $t('trace-lines-list'), on = new Set(st.chosen || st.lineInfo.map((l) => l.line));
    box.textContent = '';
    for (const l of st.lineInfo) {
      const lab = document.createElement('label');
      const c = document.createElement('input');
      c.type = 'checkbox'; c.value = l.line; c.checked = on.has(l.line);
      lab.append(c, document.createTextNode(` ${l.line + 1}: ${l.label || 'profile ' + l.profile}${l.gpu ? ' (GPU)' : ''}`));
      box.append(lab);
    }
    $t('trace-lines-filter').value = '';
    $t('trace-lines-dialog').hidden = false;
  }

  // ---- A view saved to a file and loaded again (hpcviewer's view configurations).
  function saveView() {
    const v = { hpcviewerTraceView: 1, database: hpc.info.title, t0: st.t0.toString(), t1: st.t1.toString(),
      l0: st.l0, l1: st.l1, depth: depthNow(), exposeGpu: $t('trace-expose').checked,
      crosshair: st.cross ? { t: st.cross.t.toString(), line: st.cross.line } : null, lines: st.chosen };
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([JSON.stringify(v, null, 1) + '\n'], { type: 'application/json' }));
    a.download = `${hpc.info.title || 'hpcviewer'}-trace-view.json`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }
  async function loadView(text) {
    let v;
    try { v = JSON.parse(text); } catch (e) { throw new Error(`not a saved trace view: ${e.message}`); }
    const t0 = BigInt(v.t0 ?? 'x'), t1 = BigInt(v.t1 ?? 'x');
    const l0 = Number(v.l0), l1 = Number(v.l1), depth = Number(v.depth);
    const chosen = Array.isArray(v.lines) && v.lines.length ? v.lines : null;
    const count = chosen ? chosen.length : st.all;
    if (!(v.hpcviewerTraceView === 1 && t0 >= st.min && t1 <= st.max + 1n && t1 > t0 && Number.isInteger(l0) &&
          Number.isInteger(l1) && l0 >= 0 && l1 <= count && l1 > l0 && depth >= 0 &&
          (!chosen || chosen.every((l) => Number.isInteger(l) && l >= 0 && l < st.all))))
      throw new Error('the saved view does not fit this database\'s trace');
    remember();
    setChosen(chosen, false);
    st.t0 = t0, st.t1 = t1, st.l0 = l0, st.l1 = l1;
    $t('trace-depth').value = String(depth);
    $t('trace-expose').checked = v.exposeGpu === true;
    if (v.crosshair && Number.isInteger(v.crosshair.line) && v.crosshair.line < st.all)
      st.cross = { t: BigInt(v.crosshair.t), line: v.crosshair.line };
    await fetchScreen();
    if (st.cross) await setCross(st.cross.t, st.cross.line);
  }

  async function fetchScreen() {
    const c = cv();
    const dpr = window.devicePixelRatio || 1;
    c.width = Math.min(8192, Math.max(1, Math.floor(c.clientWidth * dpr)));
    c.height = Math.max(1, Math.floor(c.clientHeight * dpr));
    const g = c.getContext('2d');
    g.fillStyle = '#fff';
    g.fillRect(0, 0, c.width, c.height);
    const seq = ++st.seq;
    const shown = st.l1 - st.l0;
    st.nrows = Math.min(shown, c.height, 4096), st.width = c.width;
    st.rows = new Array(st.nrows), st.share = new Map(), st.painted = 0;
    // The pixels' keys, for the summary only (4 bytes a pixel: tens of MB on a large screen).
    st.keys = st.lower === 'summary' ? new Int32Array(st.nrows * st.width).fill(-1) : null;
    hpc.status('trace…');
    const q = { t0: st.t0.toString(), t1: st.t1.toString(), width: c.width,
      depth: Number($t('trace-depth').value) || 0, expose: $t('trace-expose').checked ? 1 : 0 };
    // Bands of rows, each over its share of the trace lines; a few requests in flight.
    const bands = [];
    for (let r0 = 0; r0 < st.nrows; r0 += BAND) {
      const r1 = Math.min(st.nrows, r0 + BAND);
      bands.push([r0, r1, st.l0 + Math.floor(r0 * shown / st.nrows), st.l0 + Math.floor(r1 * shown / st.nrows)]);
    }
    let next = 0;
    const worker = async () => {
      while (next < bands.length && seq === st.seq) {
        const [r0, r1, p0, p1] = bands[next++];
        if (!st.chosen) {
          await fetchBand(seq, q, r0, r1, p0, p1);
          continue;
        }
        // Chosen lines: the band's rows' own lines, sampled as the server samples a range.
        const lines = [];
        for (let r = r0; r < r1; ++r) lines.push(st.chosen[st.l0 + Math.floor((2 * r + 1) * shown / (2 * st.nrows))]);
        await fetchBand(seq, { ...q, lines: ranges(lines) }, r0, r1, 0, lines.length);
      }
    };
    await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, bands.length) }, worker));
    if (seq === st.seq && st.side === 'blame') await fetchBlame();
  }

  async function fetchBlame() {
    const seq = ++st.blameSeq;
    const j = await hpc.api('trace-blame', { t0: st.t0.toString(), t1: st.t1.toString(), samples: Math.min(cv().width, 8192) });
    if (seq !== st.blameSeq) return;
    const pct = (x) => `${(100 * x).toFixed(1)}%`;
    $t('trace-blame-summary').textContent = j.gpuLines === 0
      ? 'No GPU stream traces in this database.'
      : `GPU idle ${pct(j.gpuIdle / j.span)} of the visible time (${j.gpuLines} GPU, ${j.cpuLines} CPU lines); ` +
        `${pct(j.gpuIdle > 0 ? j.unattributed / j.gpuIdle : 0)} of it with no CPU thread running`;
    const tb = $t('trace-blame');
    tb.innerHTML = '';
    for (const r of j.rows) {
      const tr = tb.insertRow();
      tr.insertCell().textContent = r.name;
      tr.insertCell().textContent = pct(r.share);
      tr.insertCell().textContent = `${(r.blame / 1e9).toPrecision(3)} s`;
    }
    tb.dataset.done = String(seq);
  }

  function lower(which) {
    st.lower = which;
    $t('trace-lower-depth').classList.toggle('active', which === 'depth');
    $t('trace-lower-summary').classList.toggle('active', which === 'summary');
    // The summary needs the pixels' keys, kept only while it is shown: the screen again.
    if (which === 'summary' && !st.keys) fetchScreen().catch(showError);
    else lowerView().catch(showError);
  }

  function side(which) {
    st.side = which;
    $t('trace-side-stats').classList.toggle('active', which === 'stats');
    $t('trace-side-blame').classList.toggle('active', which === 'blame');
    $t('trace-pane-stats').hidden = which !== 'stats';
    $t('trace-pane-blame').hidden = which !== 'blame';
    if (which === 'blame') fetchBlame().catch(showError);
  }

  // Every change of view is kept for Undo (hpcviewer's undo and redo).
  function remember() {
    st.undo.push({ t0: st.t0, t1: st.t1, l0: st.l0, l1: st.l1, chosen: st.chosen });
    st.redo = [];
  }
  function back(from, to) {
    const v = from.pop();
    if (!v) return;
    to.push({ t0: st.t0, t1: st.t1, l0: st.l0, l1: st.l1, chosen: st.chosen });
    if (v.chosen !== st.chosen) setChosen(v.chosen, false);
    st.t0 = v.t0, st.t1 = v.t1, st.l0 = v.l0, st.l1 = v.l1;
    fetchScreen().catch(showError);
  }
  // The process dimension: fewer or more trace lines around `at` (a fraction of the height),
  // and up or down by a fraction of those shown.
  function zoomLines(f, at = 0.5) {
    const n = st.l1 - st.l0, m = Math.max(1, Math.min(st.lines, Math.round(n * f)));
    if (m === n) return;
    remember();
    let l0 = Math.round(st.l0 + (n - m) * at);
    l0 = Math.max(0, Math.min(st.lines - m, l0));
    st.l0 = l0, st.l1 = l0 + m;
    fetchScreen().catch(showError);
  }
  function panLines(f) {
    const n = st.l1 - st.l0, d = Math.max(1, Math.round(n * Math.abs(f))) * Math.sign(f);
    const l0 = Math.max(0, Math.min(st.lines - n, st.l0 + d));
    if (l0 === st.l0) return;
    remember();
    st.l0 = l0, st.l1 = l0 + n;
    fetchScreen().catch(showError);
  }

  function zoom(f, at = 0.5) {
    remember();
    const span = Number(st.t1 - st.t0);
    const ns = Math.max(1000, Math.min(Number(st.max - st.min) + 1, span * f));
    let t0 = st.t0 + big((span - ns) * at);
    t0 = t0 < st.min ? st.min : t0;
    let t1 = t0 + big(ns);
    if (t1 > st.max + 1n) { t1 = st.max + 1n; t0 = t1 - big(ns) < st.min ? st.min : t1 - big(ns); }
    st.t0 = t0, st.t1 = t1;
    fetchScreen().catch(showError);
  }
  function pan(f, quiet = false) {
    if (!quiet) remember();
    const d = big(Number(st.t1 - st.t0) * f);
    let t0 = st.t0 + d, t1 = st.t1 + d;
    if (t0 < st.min) t1 += st.min - t0, t0 = st.min;
    if (t1 > st.max + 1n) t0 -= t1 - st.max - 1n, t1 = st.max + 1n;
    st.t0 = t0 < st.min ? st.min : t0, st.t1 = t1;
    fetchScreen().catch(showError);
  }

  async function hover(ev) {
    if (!st.nrows) return;
    const c = cv(), rect = c.getBoundingClientRect();
    const fx = (ev.clientX - rect.left) / rect.width, fy = (ev.clientY - rect.top) / rect.height;
    const line = st.rows[Math.min(st.nrows - 1, Math.max(0, Math.floor(fy * st.nrows)))];
    if (line === undefined) return;
    const t = st.t0 + big(Number(st.t1 - st.t0) * Math.min(0.999999, Math.max(0, fx)));
    if (ev.type === 'click') return setCross(t, line);
    if (!st.cross) await stackAt(line, t);  // with a crosshair, the stack is the crosshair's
  }
  async function stackAt(line, t) {
    const row = { line };
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
    const frag = document.createDocumentFragment();  // one insertion, however deep the stack
    for (const f of s.stack) {
      const li = document.createElement('li');
      li.textContent = f.name;
      frag.append(li);
    }
    ol.append(frag);
  }

  let drag = null;
  async function show() {
    if (!st.loaded) {
      const r = await fetch(`/api/trace?${new URLSearchParams({ width: 1, rows: 1, encoding: 'binary' })}`,
        { headers: { 'X-HPC-Token': token } });
      const buf = await r.arrayBuffer();
      if (!r.ok) throw new Error(JSON.parse(new TextDecoder().decode(buf)).error || `HTTP ${r.status}`);
      const j = decodeTrace(buf);
      st.min = j.minTime, st.max = j.maxTime, st.lines = st.all = j.lineCount;
      cv().dataset.minTime = String(st.min), cv().dataset.maxTime = String(st.max);
      st.t0 = st.min, st.t1 = st.max + 1n;
      st.l0 = 0, st.l1 = st.lines;
      st.loaded = true;
      const c = cv();
      c.addEventListener('mousemove', (ev) => {
        if (drag) {
          const dx = (ev.clientX - drag.x) / c.getBoundingClientRect().width;
          if (Math.abs(dx) > 0.01) { drag.x = ev.clientX; pan(-dx, drag.moved); drag.moved = true; }
          return;
        }
        hover(ev).catch(showError);
      });
      c.addEventListener('mousedown', (ev) => { drag = { x: ev.clientX }; });
      window.addEventListener('mouseup', (ev) => {
        const click = drag && !drag.moved && ev.target === c;
        drag = null;
        if (click) hover({ type: 'click', clientX: ev.clientX, clientY: ev.clientY }).catch(showError);
      });
      // In the depth view and the summary a drag selects a new time range (hpcviewer's); in
      // the mini map it selects times and lines; a click stays a click.
      const dragged = (canvas, done) => {
        let from = null;
        canvas.addEventListener('mousedown', (ev) => { from = ev.clientX; });
        canvas.addEventListener('mouseup', (ev) => {
          if (from === null) return;
          const a = from, rect = canvas.getBoundingClientRect();
          from = null;
          if (Math.abs(ev.clientX - a) < 5) return;
          const f = (x) => Math.min(1, Math.max(0, (x - rect.left) / rect.width));
          done(Math.min(f(a), f(ev.clientX)), Math.max(f(a), f(ev.clientX)), ev, rect);
          canvas.dataset.dragged = '1';
        });
      };
      const timeRange = (f0, f1) => {
        const span = Number(st.t1 - st.t0);
        const t0 = st.t0 + big(span * f0), t1 = st.t0 + big(span * f1);
        if (t1 - t0 < 1000n) return;
        remember();
        st.t0 = t0, st.t1 = t1;
        fetchScreen().catch(showError);
      };
      dragged($t('trace-depth-canvas'), (f0, f1) => timeRange(f0, f1));
      dragged($t('trace-summary-canvas'), (f0, f1) => timeRange(f0, f1));
      let mini = null;
      $t('trace-minimap').addEventListener('mousedown', (ev) => { mini = [ev.clientX, ev.clientY]; });
      $t('trace-minimap').addEventListener('mouseup', (ev) => {
        const m = $t('trace-minimap'), rect = m.getBoundingClientRect();
        const a = mini;
        mini = null;
        if (!a || (Math.abs(ev.clientX - a[0]) < 5 && Math.abs(ev.clientY - a[1]) < 5)) return;
        const fx = (x) => Math.min(1, Math.max(0, (x - rect.left) / rect.width));
        const fy = (y) => Math.min(1, Math.max(0, (y - rect.top) / rect.height));
        const whole = Number(st.max + 1n - st.min);
        const t0 = st.min + big(whole * Math.min(fx(a[0]), fx(ev.clientX)));
        const t1 = st.min + big(whole * Math.max(fx(a[0]), fx(ev.clientX)));
        const l0 = Math.floor(st.lines * Math.min(fy(a[1]), fy(ev.clientY)));
        const l1 = Math.max(l0 + 1, Math.ceil(st.lines * Math.max(fy(a[1]), fy(ev.clientY))));
        if (t1 - t0 < 1000n) return;
        remember();
        st.t0 = t0, st.t1 = t1, st.l0 = l0, st.l1 = Math.min(st.lines, l1);
        m.dataset.dragged = '1';
        fetchScreen().catch(showError);
      });
      $t('trace-depth-canvas').addEventListener('click', (ev) => {
        if ($t('trace-depth-canvas').dataset.dragged) { delete $t('trace-depth-canvas').dataset.dragged; return; }
        if (!st.cross || !st.depthRows) return;
        const dc = $t('trace-depth-canvas'), rect = dc.getBoundingClientRect();
        const fx = (ev.clientX - rect.left) / rect.width, fy = (ev.clientY - rect.top) / rect.height;
        const d = Math.max(0, Math.min(st.depthRows.length - 1, Math.floor(fy * st.depthRows.length)));
        const t = st.t0 + big(Number(st.t1 - st.t0) * Math.min(0.999999, Math.max(0, fx)));
        if (d !== depthNow()) { $t('trace-depth').value = String(d); fetchScreen().catch(showError); }
        setCross(t, st.cross.line).catch(showError);
      });
      $t('trace-lower-depth').onclick = () => lower('depth');
      $t('trace-lower-summary').onclick = () => lower('summary');
      $t('trace-minimap').addEventListener('click', minimapClick);
      $t('trace-save').onclick = saveView;
      $t('trace-choose').onclick = () => chooseLines().catch(showError);
      $t('trace-lines-filter').addEventListener('input', (ev) => {
        const f = ev.target.value.trim().toLowerCase();
        for (const l of $t('trace-lines-list').children) l.hidden = f !== '' && !l.textContent.toLowerCase().includes(f);
      });
      const mark = (v) => { for (const l of $t('trace-lines-list').children) if (!l.hidden) l.firstChild.checked = v; };
      $t('trace-lines-all').onclick = () => mark(true);
      $t('trace-lines-none').onclick = () => mark(false);
      $t('trace-lines-cancel').onclick = () => { $t('trace-lines-dialog').hidden = true; };
      $t('trace-lines-ok').onclick = () => {
        const picked = [...$t('trace-lines-list').querySelectorAll('input:checked')].map((c) => Number(c.value));
        $t('trace-lines-dialog').hidden = true;
        if (!picked.length) return hpc.status('no trace line chosen: the view is unchanged', true);
        remember();
        setChosen(picked);
      };
      $t('trace-load').onclick = () => $t('trace-load-file').click();
      $t('trace-load-file').onchange = async (ev) => {
        const f = ev.target.files[0];
        ev.target.value = '';
        if (f) await loadView(await f.text()).catch(showError);
      };
      c.addEventListener('wheel', (ev) => {
        ev.preventDefault();
        const rect = c.getBoundingClientRect();
        zoom(ev.deltaY < 0 ? 0.5 : 2, (ev.clientX - rect.left) / rect.width);
      }, { passive: false });
      document.getElementById('trace-zoom-in').onclick = () => zoom(0.5);
      document.getElementById('trace-zoom-out').onclick = () => zoom(2);
      document.getElementById('trace-left').onclick = () => pan(-0.25);
      document.getElementById('trace-right').onclick = () => pan(0.25);
      document.getElementById('trace-reset').onclick = () => {
        remember();
        st.t0 = st.min; st.t1 = st.max + 1n; st.l0 = 0; st.l1 = st.lines;
        fetchScreen().catch(showError);
      };
      $t('trace-lines-in').onclick = () => zoomLines(0.5);
      $t('trace-lines-out').onclick = () => zoomLines(2);
      $t('trace-up').onclick = () => panLines(-0.25);
      $t('trace-down').onclick = () => panLines(0.25);
      $t('trace-undo').onclick = () => back(st.undo, st.redo);
      $t('trace-redo').onclick = () => back(st.redo, st.undo);
      document.getElementById('trace-depth').onchange = () => fetchScreen().catch(showError);
      $t('trace-expose').onchange = () => fetchScreen().catch(showError);
      $t('trace-side-stats').onclick = () => side('stats');
      $t('trace-side-blame').onclick = () => side('blame');
      document.addEventListener('keydown', (ev) => {
        if (document.getElementById('page-trace').hidden || ev.target.tagName === 'INPUT') return;
        if (ev.key === '+' || ev.key === '=') zoom(0.5);
        else if (ev.key === '-') zoom(2);
        else if (ev.key === 'ArrowLeft') pan(-0.25);
        else if (ev.key === 'ArrowRight') pan(0.25);
        else if (ev.key === 'ArrowUp') { ev.preventDefault(); panLines(-0.25); }
        else if (ev.key === 'ArrowDown') { ev.preventDefault(); panLines(0.25); }
        else if (ev.key === 'PageUp') { ev.preventDefault(); zoomLines(0.5); }
        else if (ev.key === 'PageDown') { ev.preventDefault(); zoomLines(2); }
        else if (ev.key === 'u') back(st.undo, st.redo);
        else if (ev.key === 'U') back(st.redo, st.undo);
        else if (ev.key === '0') document.getElementById('trace-reset').click();
      });
      window.addEventListener('resize', () => { if (!document.getElementById('page-trace').hidden) fetchScreen().catch(showError); });
    }
    await fetchScreen();
  }
  return { show, loadView };
})();
