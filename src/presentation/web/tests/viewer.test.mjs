// hpcviewer in real headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core): profile view, hot path to the known hot function and its value,
// bottom-up, flat, a derived metric, the thread view, CSV, the trace view and the call stack
// under the cursor.
// With BIN_DIR and DEMO, also a database from our own pipeline (hpcrun -t on the demo
// program, then hpcprof). Any console error or page error fails the test. Screenshots go
// to OUT.
//   node viewer.test.mjs HPCSERVER DBASE_DIR OUT [BIN_DIR DEMO]
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [hpcserver, dbase, out, binDir, demo] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
let failures = 0;
const fail = (what) => { failures++; console.log(`FAIL: ${what}`); };
const check = (cond, what) => { if (!cond) fail(what); };

function startServer(db, extra = []) {
  return new Promise((resolve, reject) => {
    const p = spawn(hpcserver, [db, '--port', '0', ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
    let text = '';
    const timer = setTimeout(() => reject(new Error(`hpcserver printed no URL: ${text}`)), 20000);
    const onData = (d) => {
      text += d;
      const m = text.match(/http:\/\/\S+\?token=[0-9a-f]+/);
      if (m) { clearTimeout(timer); resolve({ proc: p, url: m[0] }); }
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('exit', (c) => reject(new Error(`hpcserver exited ${c}: ${text}`)));
  });
}

const profile = mkdtempSync(join(tmpdir(), 'hpcviewer-chromium-'));
// A fresh profile directory (playwright passes it as --user-data-dir).
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1400, height: 800 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
         '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

async function openViewer(name, extra = []) {
  const srv = await startServer(name.startsWith('/') ? name : join(dbase, name), extra);
  const page = await browser.newPage();
  const errors = [];
  page.on('console', (m) => {
    // A database without copied sources answers /api/source with 404: expected, shown as such.
    if (m.type() === 'error' && !/\/api\/source\?/.test(m.location().url)) errors.push(`${m.text()} (${m.location().url})`);
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('request', (r) => {
    // blob: URLs are the page's own (the CSV it saves).
    if (!r.url().startsWith(srv.url.split('/?')[0]) && !r.url().startsWith('blob:')) errors.push(`external request ${r.url()}`);
  });
  await page.goto(srv.url);
  await page.waitForSelector('#table-body .row');
  return { srv, page, errors };
}

const rowTexts = (page) => page.$$eval('#table-body .row', (rs) =>
  rs.sort((a, b) => a.offsetTop - b.offsetTop).map((r) => r.innerText.replace(/\s+/g, ' ').trim()));

async function step(page, label, fn) {
  try { await fn(); } catch (e) { fail(`${label}: ${e.message}`); }
  await page.screenshot({ path: join(out, `${label}.png`) });
}

// ---- small.d: spinsleep is the hot function (1.210259 s in all, 0.605316 via caller).
{
  const { srv, page, errors } = await openViewer('small.d');
  await step(page, 'small-1-top-down', async () => {
    const rows = await rowTexts(page);
    check(rows.length === 1 && rows[0].includes('main thread') && rows[0].includes('1.21026'), `top-down roots: ${rows}`);
  });
  await step(page, 'small-2-hot-path', async () => {
    await page.click('#hot-path');
    await page.waitForSelector('#table-body .row.selected');
    const sel = await page.$eval('#table-body .row.selected', (r) => r.innerText.replace(/\s+/g, ' '));
    check(/spinsleep/.test(sel) || /small\.c:3/.test(sel), `hot path ends at ${sel}`);
    const rows = await rowTexts(page);
    check(rows.some((r) => /spinsleep 0\.605316 50\.0% 0\.605316 50\.0%/.test(r)), `spinsleep via caller with 0.605316: ${rows.join(' | ')}`);
    await page.waitForFunction(() => document.querySelector('#context-path').children.length > 3);
    // The plot's values arrive in their own request: wait for them rather than race it.
    const stats = await page
      .waitForFunction(() => document.querySelector('#plot-stats').textContent.includes('max'), null, { timeout: 10000 })
      .then(() => true, () => false);
    check(stats, 'per-profile plot statistics');
  });
  // hpcviewer's CCT filters: main and its line hidden (self), their children in their place.
  await step(page, 'small-2b-filters', async () => {
    await page.click('#view-top-down');
    await page.click('#filters');
    await page.waitForSelector('#filters-dialog:not([hidden])');
    await page.fill('#filters-list .filter-row:nth-child(1) input[type=text]', 'main');
    await page.click('#filters-add');
    await page.fill('#filters-list .filter-row:nth-child(2) input[type=text]', 'small.c:1?');
    await page.click('#filters-ok');
    await page.waitForFunction(() => document.querySelector('#filters-badge').textContent === '2 filters');
    await page.waitForSelector('#table-body .row');
    await page.click('#table-body .row .twist');
    await page.waitForFunction(() => document.querySelectorAll('#table-body .row').length === 3);
    const rows = await rowTexts(page);
    check(/caller 0\.605316/.test(rows[1]) && /spinsleep 0\.604943/.test(rows[2]), `filtered tree: ${rows.join(' | ')}`);
    // Another view says the filters shape the top-down tree alone.
    await page.click('#view-flat');
    await page.waitForFunction(() => document.querySelector('#filters-badge').textContent === '2 filters (top-down view only)');
    await page.click('#view-top-down');
    await page.waitForFunction(() => document.querySelector('#filters-badge').textContent === '2 filters');
    await page.waitForSelector('#table-body .row');
    await page.click('#filters');
    await page.click('#filters-list .filter-row:nth-child(1) button');
    await page.click('#filters-list .filter-row:nth-child(1) button');
    await page.click('#filters-ok');
    await page.waitForFunction(() => document.querySelector('#filters-badge').hidden);
  });
  // Bigger text: rows grow with it (26 px at 15 px), then back.
  await step(page, 'small-2c-text-size', async () => {
    await page.click('#text-bigger');
    await page.click('#text-bigger');
    const h = await page.$eval('#table-body .row', (r) => r.getBoundingClientRect().height);
    check(Math.abs(h - 26) < 0.5, `row height with bigger text: ${h}`);
    await page.click('#text-smaller');
    await page.click('#text-smaller');
    const h2 = await page.$eval('#table-body .row', (r) => r.getBoundingClientRect().height);
    check(Math.abs(h2 - 22) < 0.5, `row height back: ${h2}`);
  });
  await step(page, 'small-3-bottom-up', async () => {
    await page.click('#view-bottom-up');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('spinsleep'));
    const rows = await rowTexts(page);
    check(/^▸ ?spinsleep 1\.21026 100\.0% 1\.21026 100\.0%/.test(rows[0]), `bottom-up first row: ${rows[0]}`);
    await page.click('#table-body .row .twist');
    // The roots are three rows already: wait for the callers themselves.
    await page.waitForFunction(() => [...document.querySelectorAll('#table-body .row')].some((r) => r.innerText.includes('←')));
    const kids = await rowTexts(page);
    check(kids[1].includes('← caller') && kids[1].includes('0.605316'), `callers of spinsleep: ${kids}`);
  });
  // Find: a call path query from the bottom-up view; a found context clicked expands the
  // top-down tree to it and selects it; plain text looks within names.
  await step(page, 'small-3b-find', async () => {
    await page.fill('#search', '**/spinsleep/**/loop:*');
    await page.press('#search', 'Enter');
    await page.waitForSelector('#find-dialog:not([hidden])');
    await page.waitForFunction(() => document.querySelectorAll('#find-list .found').length === 2);
    const summary = await page.$eval('#find-summary', (e) => e.textContent);
    check(/^2 contexts match, 2 outermost/.test(summary) && /100\.00 % of CPUTIME/.test(summary), `find summary: ${summary}`);
    const found = await page.$$eval('#find-list .found', (l) => l.map((e) => e.textContent));
    check(found.length === 2 && found.every((f) => /%\s*loop at small\.c:3\s+in spinsleep ← /.test(f)) &&
          found.some((f) => /^\s*50\.0\d %\s*loop at small\.c:3\s+in spinsleep ← caller ← main ← main thread$/.test(f)),
          `found: ${found.join(' | ')}`);
    const viaMain = await page.$$eval('#find-list .found', (l) => l.findIndex((e) => !/caller/.test(e.textContent)));
    await (await page.$$('#find-list .found'))[viaMain].click();
    await page.waitForFunction(() => document.querySelector('#view-top-down').classList.contains('active') &&
      /loop at small\.c:3/.test(document.querySelector('#table-body .row.selected')?.innerText || ''));
    const rows = await rowTexts(page);
    const at = rows.findIndex((r) => /^▾? ?spinsleep/.test(r.trim()) || /spinsleep 0\.604943/.test(r));
    check(at >= 0 && /loop at small\.c:3 0\.604943/.test(rows[at + 1] || ''), `tree expanded to the loop: ${rows.join(' | ')}`);
    await page.click('#find-close');
    await page.fill('#search', 'spinsl');
    await page.click('#find');
    await page.waitForFunction(() => /^2 contexts match/.test(document.querySelector('#find-summary').textContent) &&
      document.querySelector('#find-title').textContent.endsWith('**/*spinsl*'));
    await page.keyboard.press('Escape');  // closes it as the button does
    await page.waitForSelector('#find-dialog', { state: 'hidden' });
    await page.fill('#search', '');
  });
  // The flat view opens as hpcviewer's outline: the load module, flattened twice to its
  // functions, spinsleep's loop below it, main's call sites; then the list by function.
  await step(page, 'small-4-flat', async () => {
    await page.click('#view-flat');
    await page.waitForFunction(() => !document.querySelector('#flat-by').hidden);
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('testmeas-small'));
    let rows = await rowTexts(page);
    check(rows.length === 1 && /^▸ ?testmeas-small 1\.21026 100\.0% 1\.21026 100\.0%/.test(rows[0]), `structure roots: ${rows}`);
    await page.click('#flatten');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('small.c'));
    await page.click('#flatten');
    await page.waitForFunction(() => document.querySelectorAll('#table-body .row').length === 3);
    rows = await rowTexts(page);
    check(/^▸ ?spinsleep 1\.21026/.test(rows[0]) && rows.some((r) => /^▸ ?caller 0\.605316/.test(r)), `flattened to functions: ${rows.join(' | ')}`);
    await page.click('#table-body .row .twist');
    await page.waitForFunction(() => document.querySelectorAll('#table-body .row').length > 3);
    rows = await rowTexts(page);
    check(/loop at small\.c:3 1\.21026/.test(rows[1]), `spinsleep's loop: ${rows.join(' | ')}`);
    await page.click('#unflatten');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('small.c'));
    rows = await rowTexts(page);
    check(rows.length === 1 && /^▸ ?small\.c 1\.21026/.test(rows[0]), `unflattened to files: ${rows}`);
    await page.selectOption('#flat-by', 'function');
    await page.waitForFunction(() => document.querySelectorAll('#table-body .row').length === 3 &&
      document.querySelector('#flatten').hidden);
    rows = await rowTexts(page);
    check(rows[0].startsWith('spinsleep 1.21026'), `flat first row: ${rows[0]}`);
    await page.selectOption('#flat-by', 'line');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('small.c:3'));
  });
  await step(page, 'small-5-derived', async () => {
    await page.fill('#formula', '$0 * 1000');
    await page.click('#formula-add');
    await page.waitForFunction(() => document.querySelector('#table-head').innerText.includes('$0 * 1000'));
    const rows = await rowTexts(page);
    check(rows[0].includes('1210.26'), `derived column: ${rows[0]}`);
    await page.fill('#formula', '$0 / ');
    await page.click('#formula-add');
    check((await page.$eval('#status', (e) => e.textContent)).startsWith('formula:'), 'bad formula reported');
  });
  await step(page, 'small-6-trace', async () => {
    await page.click('#tab-trace');
    await page.waitForSelector('#trace-stats tr');
    // The trace's start and end exactly as trace.db's header has them (ns near 2^60: a JSON
    // number would round them).
    const t = readFileSync(join(dbase, 'small.d', 'trace.db'));
    const sec = Number(t.readBigUInt64LE(0x18));
    const want = [t.readBigUInt64LE(sec + 0x10), t.readBigUInt64LE(sec + 0x18)].map(String);
    const got = await page.$eval('#trace-canvas', (c) => [c.dataset.minTime, c.dataset.maxTime]);
    check(got[0] === want[0] && got[1] === want[1], `exact trace start/end ${got} vs trace.db's ${want}`);
    const stats = await page.$eval('#trace-stats', (e) => e.innerText);
    check(stats.includes('main'), `trace statistics at depth 0: ${stats}`);
    await page.fill('#trace-depth', '1');
    await page.dispatchEvent('#trace-depth', 'change');
    await page.waitForFunction(() => document.querySelector('#trace-stats').innerText.includes('caller'));
    const box = await (await page.$('#trace-canvas')).boundingBox();
    await page.mouse.move(box.x + box.width * 0.85, box.y + box.height / 2);
    await page.waitForFunction(() => document.querySelectorAll('#trace-stack li').length > 3);
    const stack = await page.$eval('#trace-stack', (e) => e.innerText);
    check(/main[\s\S]*caller[\s\S]*spinsleep/.test(stack), `call stack under the cursor: ${stack}`);
    await page.click('#trace-zoom-in');
    await page.waitForFunction(() => document.querySelector('#trace-range').textContent.includes('0.6'));
  });
  // The crosshair, the depth view of its line (main, then spinsleep or caller, then
  // spinsleep below caller: three rows), the summary, the mini map, and a view saved and
  // loaded again.
  await step(page, 'small-7-depth-view', async () => {
    const painted = await page.$eval('#trace-canvas', (c) => c.dataset.painted);
    await page.click('#trace-reset');
    await page.waitForFunction((p) => document.querySelector('#trace-canvas').dataset.painted !== p, painted);
    const box = await (await page.$('#trace-canvas')).boundingBox();
    await page.mouse.click(box.x + box.width * 0.85, box.y + box.height / 2);
    await page.waitForFunction(() => document.querySelector('#trace-depth-canvas').dataset.rows === '3');
    const cross = await page.textContent('#trace-crosshair');
    check(/crosshair: line 1 at \+[0-9.]+ s, depth 1/.test(cross), `crosshair: ${cross}`);
    const stack = await page.$eval('#trace-stack', (e) => e.innerText);
    check(/main[\s\S]*caller[\s\S]*spinsleep/.test(stack), `the crosshair's call stack: ${stack}`);
    // Click the depth view's top row: depth 0, the trace repainted at it.
    const dbox = await (await page.$('#trace-depth-canvas')).boundingBox();
    await page.mouse.click(dbox.x + dbox.width * 0.85, dbox.y + 2);
    await page.waitForFunction(() => document.querySelector('#trace-depth').value === '0');
    await page.waitForFunction(() => !document.querySelector('#trace-stats').innerText.includes('caller'));
    // A drag across the depth view selects that time range (the middle half), Undo goes back.
    await page.mouse.move(dbox.x + dbox.width * 0.25, dbox.y + dbox.height / 2);
    await page.mouse.down();
    await page.mouse.move(dbox.x + dbox.width * 0.75, dbox.y + dbox.height / 2, { steps: 4 });
    await page.mouse.up();
    await page.waitForFunction(() => /· 0\.60\d* s from \+0\.30/.test(document.querySelector('#trace-range').textContent));
    await page.click('#trace-undo');
    await page.waitForFunction(() => /· 1\.21\d* s from \+0\.0000/.test(document.querySelector('#trace-range').textContent));
    await page.click('#trace-lower-summary');
    await page.waitForFunction(() => document.querySelector('#trace-summary-canvas').dataset.painted);
    check(await page.$eval('#trace-depth-canvas', (c) => c.hidden), 'summary replaces the depth view');
    const mini = await page.$eval('#trace-minimap', (c) => c.dataset.view);
    check(mini === '0.0000,1.0000,0,1', `mini map of the whole trace: ${mini}`);
    await page.click('#trace-zoom-in');
    await page.waitForFunction(() => document.querySelector('#trace-minimap').dataset.view.startsWith('0.2500,0.5000'));
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#trace-save')]);
    const saved = JSON.parse(readFileSync(await download.path(), 'utf8'));
    check(saved.hpcviewerTraceView === 1 && saved.crosshair?.line === 0 && saved.depth === 0, `saved view: ${JSON.stringify(saved)}`);
    await page.click('#trace-reset');
    await page.waitForFunction(() => document.querySelector('#trace-minimap').dataset.view.startsWith('0.0000,1.0000'));
    await page.setInputFiles('#trace-load-file', { name: 'view.json', mimeType: 'application/json',
      buffer: Buffer.from(JSON.stringify(saved)) });
    await page.waitForFunction(() => document.querySelector('#trace-minimap').dataset.view.startsWith('0.2500,0.5000'));
    await page.setInputFiles('#trace-load-file', { name: 'bad.json', mimeType: 'application/json',
      buffer: Buffer.from(JSON.stringify({ ...saved, t1: '1' })) });
    await page.waitForFunction(() => document.querySelector('#status').textContent.includes('does not fit'));
    await page.evaluate(() => { document.querySelector('#status').textContent = ''; document.querySelector('#status').className = ''; });
  });
  // The status line must not show errors from any step.
  check(!(await page.$eval('#status', (e) => e.classList.contains('error') && !e.textContent.startsWith('formula:'))), 'status error');
  check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
  await page.close();
  srv.proc.kill();
}

// ---- loops-cputime-t.d: four threads; main._omp_fn.0 is the hottest function.
{
  const { srv, page, errors } = await openViewer('loops-cputime-t.d');
  await step(page, 'loops-0-overview', async () => {
    await page.waitForFunction(() => document.querySelector('#verdict').textContent.length > 0);
    const verdict = await page.textContent('#verdict');
    check(verdict.startsWith('compute-bound: 100% of the time in computation, most in main._omp_fn.0'), `verdict: ${verdict}`);
    const first = await page.textContent('#overview tr');
    check(first.startsWith('computation3.97331100.0%'), `overview's first row: ${first}`);
  });
  await step(page, 'loops-1-hot-path', async () => {
    await page.click('#hot-path');
    await page.waitForSelector('#table-body .row.selected');
    const rows = await rowTexts(page);
    check(rows.some((r) => /main\._omp_fn\.0 2\.97914 75\.0%/.test(r)), `loops hot path: ${rows.join(' | ')}`);
    await page.waitForFunction(() => document.querySelector('#plot-stats').textContent.includes('mean'));
    // The same values as a histogram: the four threads in ten bins; then sorted again.
    await page.selectOption('#plot-kind', 'histogram');
    const bins = await page.$eval('#plot', (c) => c.dataset.bins);
    check(bins && bins.split(',').length === 10 && bins.split(',').reduce((a, b) => a + Number(b), 0) === 4,
      `histogram of four profiles: ${bins}`);
    await page.selectOption('#plot-kind', 'sorted');
    check(!(await page.$eval('#plot', (c) => c.dataset.bins)), 'sorted plot drawn');
    // A dot of the plot by profile names its execution context.
    await page.selectOption('#plot-kind', 'plot');
    const dot = await page.evaluate(() => { const c = document.querySelector('#plot'); const d = drawPlot.dots[0]; return { x: d.x / c.width, y: d.y / c.height }; });
    const pbox = await (await page.$('#plot')).boundingBox();
    await page.mouse.move(pbox.x + dot.x * pbox.width, pbox.y + dot.y * pbox.height);
    await page.waitForFunction(() => document.querySelector('#plot-hover').textContent.includes(':'));
    const hover = await page.textContent('#plot-hover');
    check(/THREAD \d+: [0-9.e+-]+ \(click: its thread view\)$/.test(hover), `plot dot: ${hover}`);
    // Its click: that thread's view alone, then all threads again.
    await page.mouse.click(pbox.x + dot.x * pbox.width, pbox.y + dot.y * pbox.height);
    await page.waitForFunction(() => /^thread view: 1 of 4/.test(document.querySelector('#threads-badge').textContent));
    await page.click('#threads-badge .x');
    await page.waitForFunction(() => document.querySelector('#threads-badge').hidden);
    await page.waitForFunction(() => document.querySelector('#status').textContent === '' &&
      document.querySelector('#table-body .row')?.innerText.includes('2.97914'));
    await page.click('#hot-path');
    await page.waitForSelector('#table-body .row.selected');
  });
  await step(page, 'loops-1b-zoom', async () => {
    const sel = await page.$eval('#table-body .row.selected', (r) => r.innerText.replace(/\s+/g, ' ').trim());
    await page.click('#zoom-in');
    let rows = await rowTexts(page);
    check(rows[0] === sel && !rows.some((r) => r.includes('main thread')), `zoomed in on ${sel}: ${rows.join(' | ')}`);
    await page.click('#zoom-out');
    rows = await rowTexts(page);
    check(rows.some((r) => r.includes('main thread')) && rows.some((r) => r.includes(sel)), `zoomed out: ${rows.join(' | ')}`);
  });
  await step(page, 'loops-2-flat', async () => {
    await page.click('#view-flat');
    await page.selectOption('#flat-by', 'function');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('main._omp_fn.0'));
    const rows = await rowTexts(page);
    // test_separated_loops_helper, inlined at two sites (two entries in meta.db), is one row.
    check(rows[1].startsWith('test_separated_loops_helper 0.992777'), `loops flat second row: ${rows[1]}`);
    check(rows[2].startsWith('func2 0.96945'), `loops flat third row: ${rows[2]}`);
  });
  // The thread view: profile 1's values alone (application thread 0.992704 of its 0.992704),
  // then back to all four.
  await step(page, 'loops-2b-thread-view', async () => {
    await page.click('#threads');
    await page.waitForSelector('#threads-list label');
    const labels = await page.$$eval('#threads-list label', (ls) => ls.map((l) => l.textContent.trim()));
    check(labels.length === 4, `execution contexts listed: ${labels}`);
    await page.fill('#threads-filter', labels[1]);
    const shown = await page.$$eval('#threads-list label', (ls) => ls.filter((l) => !l.hidden).length);
    check(shown === 1, `the filter '${labels[1]}' shows ${shown} contexts`);
    await page.fill('#threads-filter', '');
    await page.click('#threads-none');
    await page.check('#threads-list input[value="1"]');
    await page.click('#threads-ok');
    await page.waitForFunction(() => !document.querySelector('#threads-badge').hidden);
    check((await page.textContent('#threads-badge')).startsWith('thread view: 1 of 4'), 'thread view badge');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('0.992704'));
    const rows = await rowTexts(page);
    check(rows.some((r) => /application thread 0\.992704 100\.0%/.test(r)), `thread view rows: ${rows.join(' | ')}`);
  });
  await step(page, 'loops-2c-csv', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.click('#csv')]);
    const text = readFileSync(await download.path(), 'utf8').split('\n');
    check(text[0] === 'depth,name,CPUTIME (sec) (I),CPUTIME (sec) (E)', `CSV header: ${text[0]}`);
    check(text.some((l) => l.startsWith('0,application thread,0.99270')), `CSV rows: ${text.slice(0, 3).join(' | ')}`);
    await page.click('#threads-badge .x');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('2.97914'));
    check(await page.$eval('#threads-badge', (b) => b.hidden), 'thread view cleared');
  });
  await step(page, 'loops-3-trace', async () => {
    await page.click('#tab-trace');
    await page.waitForSelector('#trace-stats tr');
    const lines = await page.$eval('#trace-range', (e) => e.textContent);
    check(lines.startsWith('4 of 4 lines'), `trace lines: ${lines}`);
  });
  // hpcviewer's filter of execution contexts: lines 2 and 4 alone (their labels listed), then
  // all four again by Undo.
  await step(page, 'loops-4-choose-lines', async () => {
    await page.click('#trace-choose');
    await page.waitForSelector('#trace-lines-dialog:not([hidden]) #trace-lines-list label');
    const labels = await page.$$eval('#trace-lines-list label', (ls) => ls.map((l) => l.textContent.trim()));
    check(labels.length === 4 && /^1: \S/.test(labels[0]), `trace lines listed: ${labels}`);
    await page.click('#trace-lines-none');
    await page.check('#trace-lines-list input[value="1"]');
    await page.check('#trace-lines-list input[value="3"]');
    await page.click('#trace-lines-ok');
    await page.waitForFunction(() => document.querySelector('#trace-range').textContent.startsWith('2 of 2 lines chosen (of 4)'));
    check((await page.textContent('#trace-lines-badge')) === '2 of 4 lines', 'badge of the chosen lines');
    const box = await (await page.$('#trace-canvas')).boundingBox();
    await page.mouse.click(box.x + box.width * 0.5, box.y + box.height * 0.75);
    await page.waitForFunction(() => /line 4 at/.test(document.querySelector('#trace-crosshair').textContent));
    await page.click('#trace-undo');
    await page.waitForFunction(() => document.querySelector('#trace-range').textContent.startsWith('4 of 4 lines ·'));
    check(await page.$eval('#trace-lines-badge', (b) => b.hidden), 'all lines again');
  });
  check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
  await page.close();
  srv.proc.kill();
}

// ---- loops-cuda-nvidia-t.d: a GPU stream line and a CPU thread line: the blame tab.
{
  const { srv, page, errors } = await openViewer('loops-cuda-nvidia-t.d');
  await step(page, 'cuda-1-trace-blame', async () => {
    await page.click('#tab-trace');
    await page.waitForSelector('#trace-stats tr');
    await page.click('#trace-side-blame');
    await page.waitForFunction(() => document.querySelector('#trace-blame').dataset.done);
    const summary = await page.$eval('#trace-blame-summary', (e) => e.textContent);
    check(/^GPU idle \d+\.\d% of the visible time \(1 GPU, 1 CPU lines\)/.test(summary), `blame summary: ${summary}`);
    check(!(await page.$eval('#trace-pane-blame', (e) => e.hidden)), 'blame pane shown');
  });
  // "Expose GPU ops": the GPU line's pixels whose middle falls in a 20 us gap between kernels
  // show the kernel: less of the visible area is idle.
  await step(page, 'cuda-2-expose-gpu', async () => {
    await page.click('#trace-side-stats');
    const idle = async () => {
      const m = (await page.$eval('#trace-stats', (e) => e.innerText)).match(/\(idle\)\s+([\d.]+)%/);
      return m ? Number(m[1]) : 0;
    };
    const before = await idle();
    const painted = await page.$eval('#trace-canvas', (c) => c.dataset.painted);
    await page.check('#trace-expose');
    await page.waitForFunction((p) => document.querySelector('#trace-canvas').dataset.painted !== p, painted);
    const after = await idle();
    check(after < before, `idle share with GPU operations exposed: ${before}% -> ${after}%`);
  });
  check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
  await page.close();
  srv.proc.kill();
}

// ---- hpcserver --compare: loops-cputime-t.d against small.d as its baseline. The baseline's
// value and the change beside each row, matched by name: main thread 0.994165 against
// 1.210259 (-0.216094, -17.9 %); main._omp_fn.0 new in the flat view.
{
  const { srv, page, errors } = await openViewer('loops-cputime-t.d', ['--compare', join(dbase, 'small.d')]);
  await step(page, 'compare-1-top-down', async () => {
    await page.waitForFunction(() => !document.querySelector('#baseline-badge').hidden);
    const head = await page.$eval('#table-head', (e) => e.innerText);
    check(/base \$0 \(I\)/.test(head) && /Δ \$0 \(I\)/.test(head), `compare columns: ${head}`);
    const rows = await rowTexts(page);
    check(rows.some((r) => /main thread 0\.994165 25\.0% 0 1\.21026 100\.0% 0 -0\.216094 -17\.9%/.test(r)),
      `main thread against the baseline: ${rows.join(' | ')}`);
  });
  await step(page, 'compare-2-flat', async () => {
    await page.click('#view-flat');
    await page.selectOption('#flat-by', 'function');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('main._omp_fn.0'));
    const rows = await rowTexts(page);
    check(rows.some((r) => /^main\._omp_fn\.0 3\.97331 100\.0% 1\.24489 31\.3% 0 0 3\.97331 new 1\.24489 new/.test(r)), `new in the flat view: ${rows.slice(0, 3).join(' | ')}`);
  });
  await step(page, 'compare-3-bottom-up', async () => {
    await page.click('#view-bottom-up');
    // The flat view's first row is main._omp_fn.0 too: wait for the bottom-up view's head.
    await page.waitForFunction(() => document.querySelector('#table-head .name')?.textContent.includes('callers') &&
      document.querySelector('#table-body .row')?.innerText.includes('main._omp_fn.0'));
    await page.waitForFunction(() => !document.querySelector('#status')?.textContent);
    const rows = await rowTexts(page);
    check(rows.some((r) => /^▸?main\._omp_fn\.0\s*3\.97331\s*100\.0%\s*1\.24489\s*31\.3%\s*0\s*0\s*3\.97331\s*new\s*1\.24489\s*new/.test(r)), `new in the bottom-up view: ${rows.slice(0, 3).join(' | ')}`);
    // Eight value columns and their percentages: names keep their width, the table scrolls
    // sideways, and the head's columns stay over the rows' once scrolled.
    const nameWidth = await page.$eval('#table-body .row .name', (e) => e.getBoundingClientRect().width);
    check(nameWidth >= 279, `the name column keeps its width: ${nameWidth}px`);
    await page.$eval('#table-body', (e) => { e.scrollLeft = e.scrollWidth; e.dispatchEvent(new Event('scroll')); });
    const edges = await page.evaluate(() => {
      const right = (el) => Math.round(el.getBoundingClientRect().right);
      const head = [...document.querySelectorAll('#table-head .num')], row = [...document.querySelector('#table-body .row').querySelectorAll('.num')];
      return { head: head.map(right), row: row.map(right), scrolled: document.querySelector('#table-head').scrollLeft };
    });
    check(edges.scrolled > 0 && JSON.stringify(edges.head) === JSON.stringify(edges.row),
      `the head scrolls with the rows: ${JSON.stringify(edges)}`);
  });
  await step(page, 'compare-4-fit-columns', async () => {
    // hpcviewer's "Resize metric columns": as wide as the values, or the values and labels;
    // the head's columns stay over the rows'.
    const widths = () => page.evaluate(() => {
      const w = (el) => Math.round(el.getBoundingClientRect().width);
      const right = (el) => Math.round(el.getBoundingClientRect().right);
      const head = [...document.querySelectorAll('#table-head .num')], row = [...document.querySelector('#table-body .row').querySelectorAll('.num')];
      return { head: head.map(w), aligned: JSON.stringify(head.map(right)) === JSON.stringify(row.map(right)),
        fits: head.every((h) => h.scrollWidth <= h.clientWidth + 1) };
    });
    await page.$eval('#table-body', (e) => { e.scrollLeft = 0; e.dispatchEvent(new Event('scroll')); });
    await page.selectOption('#fit-columns', 'data');
    const data = await widths();
    check(data.aligned && data.head.every((x) => x >= 36 && x < 92), `fitted to the values: ${JSON.stringify(data)}`);
    await page.selectOption('#fit-columns', 'label');
    const label = await widths();
    check(label.aligned && label.fits && label.head.some((x) => x > 92), `fitted to values and labels: ${JSON.stringify(label)}`);
    await page.selectOption('#fit-columns', '');
    const back = await widths();
    check(back.aligned && back.head.every((x) => x === 92), `default widths again: ${JSON.stringify(back)}`);
  });
  check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
  await page.close();
  srv.proc.kill();
}

// ---- A dense trace: loops-cputime-t.d with its trace.db rewritten as eight lines of 1,500
// records a microsecond apart, cycling through three of its contexts (about 1.5 records a
// pixel: a run per pixel). Two or three rows' runs pass the 16 KiB after which the server
// closes a binary frame, so the band arrives as several frames: every row must still be
// painted, in the colours of the three functions.
function denseTrace(src, dst) {
  cpSync(src, dst, { recursive: true });
  chmodSync(dst, 0o755);
  chmodSync(join(dst, 'trace.db'), 0o644);
  const b = readFileSync(join(src, 'trace.db'));
  const sec = Number(b.readBigUInt64LE(0x18)), pTraces = Number(b.readBigUInt64LE(sec));
  const p = Number(b.readBigUInt64LE(pTraces + 8)), e = Number(b.readBigUInt64LE(pTraces + 16));
  const ctxs = [...new Set(Array.from({ length: (e - p) / 12 }, (_, i) => b.readUInt32LE(p + 12 * i + 8)))]
    .filter((c) => c !== 0).slice(0, 3);
  const t0 = b.readBigUInt64LE(sec + 0x10), n = 8, per = 1500;
  const head = Buffer.alloc(0x40 + 24 * n), elems = Buffer.alloc(12 * n * per);
  head.write('HPCTOOLKITtrce', 0, 'latin1');
  head[14] = 4;
  head.writeBigUInt64LE(BigInt(0x20 + 24 * n), 0x10);
  head.writeBigUInt64LE(0x20n, 0x18);
  head.writeBigUInt64LE(0x40n, 0x20);
  head.writeUInt32LE(n, 0x28);
  head[0x2c] = 24;
  head.writeBigUInt64LE(t0, 0x30);
  head.writeBigUInt64LE(t0 + BigInt(1000 * (per - 1)), 0x38);
  let at = 0;
  for (let l = 0; l < n; ++l) {
    head.writeUInt32LE((l % 4) + 1, 0x40 + 24 * l);
    head.writeBigUInt64LE(BigInt(head.length + at), 0x40 + 24 * l + 8);
    for (let i = 0; i < per; ++i, at += 12) {
      elems.writeBigUInt64LE(t0 + BigInt(1000 * i), at);
      elems.writeUInt32LE(ctxs[(i + l) % ctxs.length], at + 8);
    }
    head.writeBigUInt64LE(BigInt(head.length + at), 0x40 + 24 * l + 16);
  }
  writeFileSync(join(dst, 'trace.db'), Buffer.concat([head, elems, Buffer.from('trace.db')]));
  return ctxs.length;
}

{
  const tmp = mkdtempSync(join(tmpdir(), 'hpcviewer-dense-'));
  const nctx = denseTrace(join(dbase, 'loops-cputime-t.d'), join(tmp, 'db'));
  const { srv, page, errors } = await openViewer(join(tmp, 'db'));
  await step(page, 'dense-1-trace-frames', async () => {
    check(nctx === 3, `three contexts for the dense trace: ${nctx}`);
    await page.click('#tab-trace');
    await page.waitForSelector('#trace-stats tr');
    await page.fill('#trace-depth', '9');  // the innermost function: three different ones
    await page.dispatchEvent('#trace-depth', 'change');
    await page.waitForFunction(() => document.querySelectorAll('#trace-stats tr').length >= 3);
    // Every row painted (no white row in the middle of each line's band), with more than one
    // colour along it.
    const rows = await page.$eval('#trace-canvas', (c) => {
      const g = c.getContext('2d'), out = [];
      for (let r = 0; r < 8; ++r) {
        const d = g.getImageData(0, Math.floor((r + 0.5) * c.height / 8), c.width, 1).data;
        const colours = new Set();
        let white = 0;
        for (let i = 0; i < d.length; i += 4) {
          colours.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
          if (d[i] === 255 && d[i + 1] === 255 && d[i + 2] === 255) ++white;
        }
        out.push([colours.size, white / (d.length / 4)]);
      }
      return out;
    });
    check(rows.length === 8 && rows.every(([n, w]) => n >= 3 && w < 0.05),
          `each row painted in several colours: ${JSON.stringify(rows)}`);
    const frames = await page.evaluate(async () => {
      const c = document.querySelector('#trace-canvas');
      const r = await fetch(`/api/trace?width=${c.width}&depth=9&rows=8&encoding=binary`, { headers: { 'X-HPC-Token': token } });
      const dv = new DataView(await r.arrayBuffer());
      let n = 0;
      for (let off = 0; off < dv.byteLength; ++n) {
        const hl = dv.getUint32(off, true);
        const head = JSON.parse(new TextDecoder().decode(new Uint8Array(dv.buffer, off + 4, hl)));
        off += 4 + hl + 8 * head.lines.reduce((a, l) => a + l.runs, 0);
      }
      return n;
    });
    check(frames >= 2, `the screen's binary reply has several frames: ${frames}`);
  });
  // The process dimension: half the lines around the middle, one line down, undone twice,
  // redone once.
  await step(page, 'dense-2-lines', async () => {
    const range = (want) => page.waitForFunction((w) => document.querySelector('#trace-range').textContent.startsWith(w), want,
      { timeout: 10000 });
    await range('8 of 8 lines ·');
    await page.click('#trace-lines-in');
    await range('4 of 8 lines (lines 3-6)');
    await page.click('#trace-down');
    await range('4 of 8 lines (lines 4-7)');
    await page.click('#trace-undo');
    await range('4 of 8 lines (lines 3-6)');
    await page.click('#trace-undo');
    await range('8 of 8 lines ·');
    await page.click('#trace-redo');
    await range('4 of 8 lines (lines 3-6)');
  });
  check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
  await page.close();
  srv.proc.kill();
  rmSync(tmp, { recursive: true, force: true });
}

// ---- Our own pipeline: hpcrun -t on the demo program (stencil ~50 % of the CPU time, from
// main), hpcprof, then the viewer: the hot path ends in stencil's code, stencil leads the
// flat view, the trace has a line per thread and its call stacks reach main.
const runnable = (p) => { try { accessSync(p, constants.X_OK); return true; } catch { return false; } };
if (binDir && demo && [`${binDir}/hpcrun`, `${binDir}/hpcprof`, demo].every(runnable)) {
  const tmp = mkdtempSync(join(tmpdir(), 'hpcviewer-pipeline-'));
  const run = (cmd, args) => {
    const r = spawnSync(cmd, args, { stdio: 'ignore', timeout: 300000 });
    check(r.status === 0, `${cmd} ${args.join(' ')}: exit ${r.status}`);
  };
  run(`${binDir}/hpcrun`, ['-e', 'REALTIME@1000', '-t', '-o', join(tmp, 'demo.m'), demo]);
  run(`${binDir}/hpcprof`, ['-M', 'stats', '-o', join(tmp, 'demo.d'), join(tmp, 'demo.m')]);
  const { srv, page, errors } = await openViewer(join(tmp, 'demo.d'));
  await step(page, 'pipeline-1-hot-path', async () => {
    await page.click('#hot-path');
    await page.waitForSelector('#table-body .row.selected');
    await page.waitForFunction(() => document.querySelector('#context-path').children.length > 3);
    const path = await page.$eval('#context-path', (e) => e.innerText);
    check(/main[\s\S]*stencil/.test(path), `hot path through main to stencil: ${path}`);
  });
  // With -M stats, a statistic over the profiles as a column (hpcviewer's :Max ...): the main
  // thread's context has values in one profile only, so its max is its sum.
  await step(page, 'pipeline-1b-stats', async () => {
    const dm = await page.evaluate(() => hpc.info.defaultMetric);
    const opts = await page.$$eval('#metric-add option', (os) => os.map((o) => o.value));
    check(opts.includes(`s${dm}:max`) && opts.includes(`s${dm}:mean`), `statistics offered: ${opts}`);
    await page.selectOption('#metric-add', `s${dm}:max`);
    await page.waitForFunction((m) => document.querySelector('#table-head').innerText.includes(`$${m} max`), dm);
    await page.waitForFunction(() => table.roots.some((r) => r.stats));
    const [sum, max] = await page.evaluate((m) => {
      const n = table.roots.find((r) => r.name === 'main thread');
      return [n.inc[m], n.stats.inc[m].max];
    }, dm);
    check(sum > 0 && Math.abs(sum - max) <= 1e-9 * sum, `main thread: sum ${sum}, max over the profiles ${max}`);
    const rows = await rowTexts(page);
    check(rows.some((r) => r.includes('main thread')), `rows with the statistic: ${rows.slice(0, 3).join(' | ')}`);
  });
  await step(page, 'pipeline-2-flat', async () => {
    await page.click('#view-flat');
    await page.selectOption('#flat-by', 'function');
    await page.waitForFunction(() => document.querySelector('#table-body .row')?.innerText.includes('stencil'));
    const rows = await rowTexts(page);
    check(/^stencil\b/.test(rows[0]), `stencil leads the flat view: ${rows.slice(0, 3).join(' | ')}`);
  });
  await step(page, 'pipeline-3-trace', async () => {
    await page.click('#tab-trace');
    await page.waitForSelector('#trace-stats tr');
    const lines = await page.$eval('#trace-range', (e) => e.textContent);
    check(/^([2-9]|\d\d+) of \1 lines/.test(lines), `a trace line per thread: ${lines}`);
    const box = await (await page.$('#trace-canvas')).boundingBox();
    await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.25);
    await page.waitForFunction(() => document.querySelectorAll('#trace-stack li').length > 1);
    const stack = await page.$eval('#trace-stack', (e) => e.innerText);
    check(/main/.test(stack), `call stack under the cursor: ${stack}`);
  });
  check(errors.length === 0, `console errors: ${errors.join(' | ')}`);
  await page.close();
  srv.proc.kill();
  rmSync(tmp, { recursive: true, force: true });
} else {
  console.log('hpcviewer browser test: hpcrun, hpcprof or demo not built; pipeline database skipped');
}

await browser.close();
rmSync(profile, { recursive: true, force: true });
console.log(`hpcviewer browser test: ${failures ? 'FAILED' : 'ok'} (${failures} failures); screenshots in ${out}`);
process.exit(failures ? 1 : 0);
