// Drives the admin dashboard in Debian's Chromium (playwright-core, no
// browser download) and prints, as one JSON line, what a person would have
// seen: each view's tables and texts, the chart, the banners, and every
// console message, failed request, CSP violation and request to another
// host. t/75-dashboard.t decides what is right; this script only looks.
//
//   node dashboard.mjs '{"url":"http://127.0.0.1:PORT/admin","key":"sk-…","badKey":"sk-wrong",
//                         "plainKey":"sk-not-admin","views":["overview",…],"history":{"scope":"user:x"},
//                         "shots":"/dir","narrow":true,"sort":true}'
import { chromium } from 'playwright-core';

const opts = JSON.parse(process.argv[2] || '{}');
const executablePath = process.env.CHROMIUM_BIN || '/usr/bin/chromium';
const origin = new URL(opts.url).origin;
const report = { console: [], pageErrors: [], failedRequests: [], badResponses: [], otherHosts: [], csp: [], steps: {} };
const deadline = setTimeout(() => { console.log(JSON.stringify({ ...report, fatal: 'timed out' })); process.exit(3); }, 90000);

const browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu'] });
try {
  const context = await browser.newContext({ viewport: { width: 1360, height: 900 }, deviceScaleFactor: 1 });
  const page = await context.newPage();
  // A violation of the page's own policy, as the page sees it.
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => {
      window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`);
    });
  });
  page.on('console', (m) => report.console.push({ type: m.type(), text: m.text() }));
  page.on('pageerror', (e) => report.pageErrors.push(String(e && e.message)));
  page.on('requestfailed', (r) => report.failedRequests.push(`${r.method()} ${r.url()} ${r.failure() && r.failure().errorText}`));
  page.on('request', (r) => {
    const u = new URL(r.url());
    if (u.protocol !== 'data:' && u.origin !== origin) report.otherHosts.push(r.url());
  });
  page.on('response', (r) => {
    if (r.status() >= 400) report.badResponses.push({ url: r.url(), status: r.status() });
  });

  const shot = async (name) => {
    if (opts.shots) await page.screenshot({ path: `${opts.shots}/${name}.png`, fullPage: true });
  };
  const signIn = async (key) => {
    await page.fill('#key', key);
    await page.click('#signin button[type=submit]');
  };
  const storage = () => page.evaluate(() => ({
    local: Object.keys(localStorage).map((k) => [k, localStorage.getItem(k)]),
    session: Object.keys(sessionStorage).map((k) => [k, sessionStorage.getItem(k)]),
    url: location.href,
  }));
  const bannerText = () => page.evaluate(() => { const b = document.getElementById('banner'); return b.hidden ? '' : b.textContent; });
  // A view's tables as arrays of {column key: cell text}; footers apart.
  const tables = () => page.evaluate(() => {
    const out = {};
    for (const t of document.querySelectorAll('#view table[data-table]')) {
      // A cell's text; a usage cell also gives its limit (col.of) and in/out detail (col.detail) apart.
      const cells = (td) => {
        const m = td.querySelector('.meter');
        if (!m) return [[td.dataset.col, td.textContent.trim()]];
        const out = [[td.dataset.col, m.querySelector('.value').textContent.trim()]];
        for (const part of ['of', 'detail']) {
          const e = m.querySelector(`.${part}`);
          if (e) out.push([`${td.dataset.col}.${part}`, e.textContent.trim()]);
        }
        return out;
      };
      const rows = (sel) => [...t.querySelectorAll(sel)].map((tr) => Object.fromEntries(
        [...tr.querySelectorAll('td')].flatMap(cells)));
      out[t.dataset.table] = { rows: rows('tbody tr'), foot: rows('tfoot tr'),
        bars: t.querySelectorAll('[role=progressbar]').length };
    }
    return out;
  });
  const viewState = () => page.evaluate(() => {
    const v = document.querySelector('#view > [data-view]');
    return {
      view: v ? v.dataset.view : null,
      text: document.getElementById('view').innerText,
      empties: [...document.querySelectorAll('#view .empty')].map((e) => e.textContent),
      // Cards whose content is wider than the card (a long word, a file path): their titles.
      overflowing: [...document.querySelectorAll('#view .card')].filter((c) => c.scrollWidth > c.clientWidth + 1)
        .map((c) => (c.querySelector('h2') || c).textContent.slice(0, 60)),
      outage: !!document.querySelector('#view .outage'),
      signinVisible: !document.getElementById('signin').hidden,
      tabsVisible: !document.getElementById('tabs').hidden,
    };
  });
  const waitView = (name) => page.waitForFunction((n) => {
    const v = document.querySelector('#view > [data-view]');
    return v && v.dataset.view === n && !document.getElementById('view').hasAttribute('aria-busy');
  }, name, { timeout: 15000 });

  // 1. The page, before any key.
  const res = await page.goto(opts.url, { waitUntil: 'networkidle' });
  report.steps.load = { status: res.status(), signinVisible: await page.isVisible('#signin'),
    tabsVisible: await page.isVisible('#tabs'), title: await page.title() };
  await shot('signin');

  // 2. A wrong key, then a key that is not an admin's: an error, no data.
  for (const [step, key] of [['badKey', opts.badKey], ['plainKey', opts.plainKey]]) {
    if (!key) continue;
    const before = report.badResponses.length;
    await signIn(key);
    await page.waitForFunction(() => !document.getElementById('banner').hidden, null, { timeout: 15000 });
    report.steps[step] = { banner: await bannerText(), ...(await viewState()), storage: await storage(),
      responses: report.badResponses.slice(before) };
    if (step === 'badKey') await shot('wrong-key');
  }
  // 2b. A key that cannot be sent as a header: said at once, nothing sent.
  if (opts.oddKey) {
    const sent = report.badResponses.length;
    await signIn(opts.oddKey);
    await page.waitForFunction(() => /printable ASCII/.test(document.getElementById('banner').textContent), null, { timeout: 15000 });
    report.steps.oddKey = { banner: await bannerText(), ...(await viewState()), storage: await storage(),
      responses: report.badResponses.slice(sent) };
  }
  const expectedErrors = report.badResponses.length;
  const consoleBefore = report.console.length;

  // 3. The admin key, and each view.
  await signIn(opts.key);
  for (const name of opts.views || []) {
    await page.click(`#tabs button[data-view="${name}"]`);
    await waitView(name);
    const s = { ...(await viewState()), banner: await bannerText(), tables: await tables() };
    if (name === 'history' && opts.history) {
      if (opts.history.scope) {
        await page.selectOption('#view select[name=Scope]', opts.history.scope);
        await page.waitForFunction((sc) => document.querySelector('#view section h2')?.textContent.includes(sc.replace(/^[a-z]+:/, '')), opts.history.scope, { timeout: 15000 });
        await waitView('history');
      }
      const chart = await page.evaluate(() => {
        const bars = [...document.querySelectorAll('#view svg.chart g.point')];
        return { bars: bars.length, values: bars.map((b) => Number(b.dataset.value)), buckets: bars.map((b) => b.dataset.bucket),
          ticks: [...document.querySelectorAll('#view svg.chart text.tick')].map((t) => t.textContent),
          title: document.querySelector('#view section h2')?.textContent };
      });
      await page.hover('#view svg.chart g.point:last-of-type');
      chart.readout = await page.textContent('#view .readout');
      s.chart = chart;
    }
    report.steps[name] = s;
    await shot(name);
  }

  // 4. The order clicks on a header give (the users by name).
  if (opts.sort) {
    await page.click('#tabs button[data-view="usage"]');
    await waitView('usage');
    await page.click('table[data-table=usage-users] button.sort[data-key=name]');
    const asc = await page.$$eval('table[data-table=usage-users] tbody td[data-col=name]', (t) => t.map((x) => x.textContent));
    await page.click('table[data-table=usage-users] button.sort[data-key=name]');
    const desc = await page.$$eval('table[data-table=usage-users] tbody td[data-col=name]', (t) => t.map((x) => x.textContent));
    report.steps.sort = { asc, desc };
  }

  // 5. A narrow screen.
  if (opts.narrow) {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.click('#tabs button[data-view="usage"]');
    await waitView('usage');
    report.steps.narrow = { scrollWidth: await page.evaluate(() => document.documentElement.scrollWidth) };
    // The overview on the narrow screen too.
    await page.click('#tabs button[data-view="overview"]');
    await waitView('overview');
    report.steps.narrowOverview = await viewState();
    await shot('usage-narrow');
    await page.setViewportSize({ width: 1360, height: 900 });
  }

  // 6. Pause, and where the key is.
  await page.click('#pause');
  report.steps.pause = { label: await page.textContent('#pause'), pressed: await page.getAttribute('#pause', 'aria-pressed') };
  report.steps.storage = await storage();
  report.steps.signedInErrors = { badResponses: report.badResponses.slice(expectedErrors), console: report.console.slice(consoleBefore) };
  await page.click('#signout');
  report.steps.signout = { ...(await viewState()), banner: await bannerText(), storage: await storage() };

  report.csp = await page.evaluate(() => window.__csp);
  await context.close();
} catch (e) {
  report.fatal = String(e && e.stack || e);
} finally {
  await browser.close();
  clearTimeout(deadline);
}
console.log(JSON.stringify(report));
