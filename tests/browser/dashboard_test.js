// The dashboard in a real browser (Debian's chromium, driven by
// playwright-core): run by tests/e2e/ui_browser_test.cpp against a cluster
// it started, with what to look for in the environment:
//   PGFLEET_UI_URL       the dashboard (http://127.0.0.1:PORT/)
//   PGFLEET_UI_JOBS      ids of submitted jobs the jobs page must list (comma-separated)
//   PGFLEET_UI_LIVE_JOB  a running job that ends once PGFLEET_UI_GO_FILE exists
//   PGFLEET_UI_XSS_JOB   a job whose command is echo <script>alert(1)</script> <img ...>
//   PGFLEET_UI_SHOTS     where to save screenshots (their paths are printed)
// Exits 0 when every check held, 1 naming the first that did not. Nothing
// is fetched from anywhere but the dashboard: any other request fails the test.
'use strict';

const fs = require('fs');
const path = require('path');
const { chromium } = require('playwright-core');

const env = name => {
  const v = process.env[name];
  if (!v) throw new Error('missing $' + name);
  return v;
};
const url = env('PGFLEET_UI_URL');
const origin = new URL(url).origin;
const jobs = env('PGFLEET_UI_JOBS').split(',');
const liveJob = env('PGFLEET_UI_LIVE_JOB');
const goFile = env('PGFLEET_UI_GO_FILE');
const xssJob = env('PGFLEET_UI_XSS_JOB');
const shots = env('PGFLEET_UI_SHOTS');
const XSS = '<script>alert(1)</script>';
const IMG = '<img src=x onerror=alert(2)>';

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok: ' + what);
}

async function main() {
  fs.mkdirSync(shots, { recursive: true });
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const problems = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    page.on('dialog', d => { problems.push('a dialog fired: ' + d.message()); d.dismiss(); });
    page.on('pageerror', e => problems.push('page error: ' + e.message));
    page.on('console', m => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
    await page.route('**/*', route => {
      const u = route.request().url();
      if (!u.startsWith(origin + '/')) {
        problems.push('request beyond the dashboard: ' + u);
        return route.abort();
      }
      return route.continue();
    });
    const shot = async name => {
      const file = path.join(shots, name);
      await page.screenshot({ path: file, fullPage: true });
      console.log('screenshot: ' + file);
    };

    // The jobs page lists every submitted job.
    await page.goto(url + '#/jobs');
    for (const id of jobs) {
      await page.waitForSelector(`tr[data-job-id="${id}"]`, { timeout: 15000 });
    }
    check(true, 'the jobs page lists jobs ' + jobs.join(', '));
    await page.waitForSelector('#live.on', { timeout: 15000 });
    check(true, 'the page receives live updates');

    // A job that finishes changes state on the page without a reload.
    const stateOf = id => page.textContent(`tr[data-job-id="${id}"] td.state`);
    await page.waitForFunction(id => {
      const td = document.querySelector(`tr[data-job-id="${id}"] td.state`);
      return td && td.textContent === 'running';
    }, liveJob, { timeout: 20000 });
    check(true, 'job ' + liveJob + ' shows running');
    await shot('jobs-running.png');
    await page.evaluate(() => { window.__notReloaded = true; });
    fs.writeFileSync(goFile, 'go\n');
    await page.waitForFunction(id => {
      const td = document.querySelector(`tr[data-job-id="${id}"] td.state`);
      return td && td.textContent === 'succeeded';
    }, liveJob, { timeout: 30000 });
    check(await page.evaluate(() => window.__notReloaded === true),
      'job ' + liveJob + ' turned succeeded on the page without a reload (now ' +
      (await stateOf(liveJob)) + ')');
    await shot('jobs-finished.png');

    // What the database holds is text, never markup.
    const xssRow = `tr[data-job-id="${xssJob}"]`;
    const command = await page.textContent(`${xssRow} td:nth-child(7)`);
    check(command === 'echo ' + XSS + ' ' + IMG, 'the command ' + XSS + ' shows as text (got ' + command + ')');
    check(await page.evaluate(() => document.scripts.length) === 1,
      'the page holds no script element but its own');
    check(await page.evaluate(() => document.querySelectorAll('main img').length) === 0,
      'an <img> in a command is text, not an image');

    // The job page: its fields, events and output.
    await page.goto(url + '#/job/' + xssJob);
    await page.waitForSelector('[data-field="command"]', { timeout: 15000 });
    check(await page.textContent('[data-field="command"]') === 'echo ' + XSS + ' ' + IMG,
      'the job page shows the command as text');
    await page.waitForFunction(() => {
      const n = document.getElementById('log-note');
      return n && n.textContent !== 'loading...';
    }, null, { timeout: 15000 });
    const log = await page.textContent('#log');
    check(log.includes(XSS + ' ' + IMG),
      'the job page shows the job\'s output, as text (' + (await page.textContent('#log-note')) + ')');
    await shot('job.png');

    // The overview: the cluster, its hosts and formations.
    await page.goto(url + '#/');
    await page.waitForSelector('tr[data-host="h1"]', { timeout: 15000 });
    check(true, 'the overview lists host h1');
    await shot('overview.png');

    check(problems.length === 0, 'no dialog, page error or outside request (' + problems.join('; ') + ')');
  } finally {
    await browser.close();
  }
}

main().then(() => process.exit(0), err => {
  console.error(err.message);
  process.exit(1);
});
