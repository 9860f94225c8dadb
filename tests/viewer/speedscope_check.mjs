#!/usr/bin/env node
// Load a Chrome trace JSON into speedscope (the real viewer, from npm) running
// in headless Chromium, and check that it imports and renders.
//
//   node speedscope_check.mjs TRACE.json [--expect NAME ...] [--screenshot OUT.png]
//                             [--allow-warnings] [--timeout SEC] [--chromium PATH]
//
// Checks that speedscope imports the trace without alerts, page errors or
// importer warnings (e.g. badly nested events; --allow-warnings tolerates
// those), names the file and its threads, lists every --expect NAME in its
// sandwich table (NAME alone or with the event's args appended as JSON), and
// renders the flame chart; all within --timeout seconds (default 30).
//
// Exit status: 0 all checks passed, 1 a check failed, 2 bad usage.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const RELEASE = path.join(HERE, 'node_modules', 'speedscope', 'dist', 'release');
let TIMEOUT_MS = 30000; // --timeout SEC
const CHROMIUM_FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
];
const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.png': 'image/png', '.ico': 'image/x-icon', '.wasm': 'application/wasm', '.woff2': 'font/woff2',
};

function usage(msg) {
  if (msg) console.error(`speedscope_check: ${msg}`);
  console.error('usage: node speedscope_check.mjs TRACE.json [--expect NAME ...] [--screenshot OUT.png]' +
    ' [--allow-warnings] [--timeout SEC] [--chromium PATH]');
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { trace: null, expect: [], screenshot: null, allowWarnings: false,
    chromium: process.env.CHROMIUM || '/usr/bin/chromium' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => (i + 1 < argv.length ? argv[++i] : usage(`${a} needs a value`));
    if (a === '--expect') opts.expect.push(value());
    else if (a === '--screenshot') opts.screenshot = value();
    else if (a === '--chromium') opts.chromium = value();
    else if (a === '--allow-warnings') opts.allowWarnings = true;
    else if (a === '--timeout') TIMEOUT_MS = 1000 * Number(value()) || usage('bad --timeout');
    else if (a === '-h' || a === '--help') usage();
    else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else if (opts.trace === null) opts.trace = a;
    else usage(`unexpected argument ${a}`);
  }
  if (!opts.trace) usage('no trace file given');
  if (!fs.existsSync(opts.trace)) usage(`no such file: ${opts.trace}`);
  if (!fs.existsSync(path.join(RELEASE, 'index.html'))) {
    usage(`speedscope not installed at ${RELEASE} (run npm ci in ${HERE})`);
  }
  if (!fs.existsSync(opts.chromium)) usage(`no chromium at ${opts.chromium}`);
  return opts;
}

// Serves speedscope's release files at / and the trace at /trace/<basename>.
function startServer(tracePath) {
  const traceUrlPath = '/trace/' + encodeURIComponent(path.basename(tracePath));
  const server = http.createServer((req, res) => {
    const urlPath = new URL(req.url, 'http://x').pathname;
    let file;
    if (urlPath === traceUrlPath) file = tracePath;
    else {
      file = path.join(RELEASE, path.normalize(decodeURIComponent(urlPath)));
      if (!file.startsWith(RELEASE + path.sep)) file = null;
    }
    fs.readFile(file ?? '', (err, data) => {
      if (err) { res.writeHead(404); res.end('not found'); return; }
      res.writeHead(200, { 'Content-Type': TYPES[path.extname(file)] || 'application/octet-stream',
        'Cache-Control': 'no-store' });
      res.end(data);
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({ server, traceUrlPath, port: server.address().port }));
  });
}

// In the page: rows of speedscope's sandwich table (virtualised: only the
// visible rows exist in the DOM), its scroll container and the toolbar text.
function pageState() {
  const rows = [...document.querySelectorAll('div[style*="translateY"] > table tr')]
    .filter((tr) => tr.cells.length === 3);
  // Toolbar: [view tabs] <profile name + "(i/n)" + hidden thread selector> [Export ...]
  const tab = [...document.querySelectorAll('div')]
    .find((d) => d.children.length === 1 && d.textContent.endsWith('Time Order'));
  const bar = tab && tab.parentElement && tab.parentElement.parentElement;
  const middle = bar ? [...bar.childNodes].slice(1, -1) : [];
  return {
    title: document.title,
    failed: document.body.innerText.includes('Something went wrong'),
    names: rows.map((tr) => tr.cells[2].textContent.trim()),
    canvases: document.querySelectorAll('canvas').length,
    profile: middle.map((n) => (n.nodeType === 3 ? n.textContent : n.innerText)).join('').trim(),
    threads: bar ? [...bar.querySelectorAll('tr[title]')].map((tr) => tr.title) : [],
  };
}

// Scrolls the table from the top (it keeps its position across threads) to
// the bottom, half a screen at a time, collecting every row's name.
async function collectSandwichNames(page) {
  const names = new Set();
  const scroll = (first) => {
    const tr = document.querySelector('div[style*="translateY"] > table tr');
    let s = tr ? tr.closest('table') : null;
    while (s && !/(auto|scroll)/.test(getComputedStyle(s).overflowY)) s = s.parentElement;
    if (!s) return first;
    if (first) s.scrollTop = 0;
    else if (s.scrollTop + s.clientHeight >= s.scrollHeight - 1) return false;
    else s.scrollTop += Math.max(20, Math.floor(s.clientHeight / 2));
    s.dispatchEvent(new Event('scroll'));
    return new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))));
  };
  let more = await page.evaluate(scroll, true);
  while (more) {
    for (const n of (await page.evaluate(pageState)).names) names.add(n);
    more = await page.evaluate(scroll, false);
  }
  return names;
}

const matches = (shown, want) => shown === want || shown.startsWith(want + ' {'); // args are appended as JSON

async function check(opts, page, state) {
  const { traceUrlPath, port } = state;
  const base = `http://127.0.0.1:${port}`;
  const fileName = path.basename(opts.trace);
  const url = `${base}/index.html#profileURL=${encodeURIComponent(base + traceUrlPath)}&view=sandwich`;
  let ok = true;
  const pass = (msg) => console.log(`ok   ${msg}`);
  const fail = (msg) => { console.log(`FAIL ${msg}`); ok = false; };

  await page.goto(url);
  // Loaded = speedscope set the title from the profile and rendered the sandwich table.
  const loaded = await Promise.race([
    page.waitForFunction(() => (document.title.endsWith(' - speedscope') &&
      document.querySelector('div[style*="translateY"] > table tr')) ||
      document.body.innerText.includes('Something went wrong'), null, { timeout: TIMEOUT_MS, polling: 50 })
      .then(() => true),
    state.fatal,
  ]);
  if (!loaded) return false;
  let s = await page.evaluate(pageState);
  if (s.failed) throw new Error('speedscope: "Something went wrong" (import failed)');
  s.title === `${fileName} - speedscope` ? pass(`title shows file name: "${s.title}"`)
    : fail(`title "${s.title}" does not name ${fileName}`);

  const m = s.profile.match(/^(.*?)(?: \((\d+)\/(\d+)\))?$/);
  const profileCount = m[3] ? Number(m[3]) : 1;
  m[1] ? pass(`toolbar shows profile "${m[1]}"`) : fail('toolbar shows no profile name');
  if (profileCount === 1) pass('one thread profile (speedscope shows no selector)');
  else if (s.threads.length === profileCount && s.threads[0] === m[1]) {
    pass(`thread selector lists ${profileCount} profiles: ${s.threads.map((t) => `"${t}"`).join(', ')}`);
  } else fail(`thread selector lists ${s.threads.length} profiles, toolbar says ${profileCount}`);

  const all = new Set();
  for (let i = 0; i < profileCount; i++) {
    if (i > 0) {
      await page.keyboard.press('n');
      await page.waitForFunction((want) => document.body.innerText.includes(want), `(${i + 1}/${profileCount})`,
        { timeout: TIMEOUT_MS });
    }
    const who = (await page.evaluate(pageState)).profile.replace(/ \(\d+\/\d+\)$/, '');
    const names = await collectSandwichNames(page);
    names.size > 0 ? pass(`thread "${who}": ${names.size} name(s) in sandwich table`)
      : fail(`thread "${who}": sandwich table is empty`);
    for (const n of names) all.add(n);
  }
  for (const want of opts.expect) {
    const hit = [...all].find((n) => matches(n, want));
    hit ? pass(`found "${want}"${hit !== want ? ` (shown as ${hit})` : ''}`) : fail(`name "${want}" not shown by speedscope`);
  }

  // Back to the first thread's flame chart (time order) for the screenshot.
  await page.keyboard.press('1');
  for (let i = 1; i < profileCount; i++) await page.keyboard.press('p');
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  s = await page.evaluate(pageState);
  s.canvases >= 3 ? pass(`flame chart view rendered (${s.canvases} canvases)`) : fail('flame chart view not rendered');
  if (opts.screenshot) {
    await page.screenshot({ path: opts.screenshot });
    console.log(`screenshot: ${opts.screenshot}`);
  }
  for (const w of state.warnings.slice(0, 5)) {
    opts.allowWarnings ? console.log(`warn speedscope: ${w}`) : fail(`speedscope warning: ${w}`);
  }
  if (state.warnings.length > 5) console.log(`     ... ${state.warnings.length - 5} more warnings`);
  if (ok) console.log(`speedscope: OK (${all.size} names found)`);
  return ok;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  let userDir, context, srv;
  let rejectFatal;
  const state = { warnings: [], fatal: new Promise((_, rej) => { rejectFatal = rej; }) };
  state.fatal.catch(() => {});
  let timer;
  try {
    srv = await startServer(path.resolve(opts.trace));
    Object.assign(state, srv);
    userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'speedscope-check-'));
    context = await chromium.launchPersistentContext(userDir, {
      executablePath: opts.chromium, headless: true, args: CHROMIUM_FLAGS,
      viewport: { width: 1280, height: 720 }, timeout: TIMEOUT_MS,
    });
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(TIMEOUT_MS);
    page.on('pageerror', (e) => rejectFatal(new Error(`page error: ${e.message}`)));
    page.on('dialog', (d) => { rejectFatal(new Error(`speedscope alert: ${d.message()}`)); d.dismiss().catch(() => {}); });
    page.on('console', (msg) => {
      const t = msg.text();
      if (msg.type() === 'error') rejectFatal(new Error(`console error: ${t}`));
      else if (t.startsWith('Failed to load format')) rejectFatal(new Error(`speedscope could not import: ${t}`));
      else if (msg.type() === 'warning' && !t.includes('WebGL') && !t.includes('GL Driver')) state.warnings.push(t);
    });
    const timeout = new Promise((_, rej) => {
      timer = setTimeout(() => rej(new Error(`timed out after ${TIMEOUT_MS / 1000} s`)), TIMEOUT_MS);
    });
    const ok = await Promise.race([check(opts, page, state), state.fatal, timeout]);
    if (!ok) console.log('speedscope: FAILED');
    console.log(`(${((Date.now() - started) / 1000).toFixed(1)} s)`);
    return ok ? 0 : 1;
  } catch (e) {
    console.log(`FAIL ${e.message.split('\n')[0]}`);
    console.log('speedscope: FAILED');
    return 1;
  } finally {
    clearTimeout(timer);
    if (context) await context.close().catch(() => {});
    if (srv) srv.server.close();
    if (userDir) fs.rmSync(userDir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
