// The pgfleet dashboard (served by `pgfleet ui`, built into the binary).
// Plain JS, no framework, nothing fetched but this server's own /api.
// Everything the database holds reaches the page through textContent or
// attribute values, never parsed as markup: a job named <script> is text.
'use strict';

const view = document.getElementById('view');
const statusLine = document.getElementById('status');
const live = document.getElementById('live');

// el('td', {class: 'num'}, 'text', child...): strings become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function text(v) { return v === null || v === undefined ? '' : String(v); }

async function api(path) {
  const res = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' });
  const body = await res.json().catch(() => ({ error: 'HTTP ' + res.status }));
  if (!res.ok) throw new Error(body.error || ('HTTP ' + res.status));
  return body;
}

function table(headers, rows, rowAttrs) {
  const head = el('tr', {}, ...headers.map(h => el('th', {}, h)));
  const body = rows.map((cells, i) => el('tr', rowAttrs ? rowAttrs(i) : {}, ...cells.map(c =>
    c instanceof Node && c.tagName === 'TD' ? c : el('td', {}, c))));
  return el('table', {}, el('thead', {}, head), el('tbody', {}, ...body));
}

function stateCell(state) {
  return el('td', { class: 'state state-' + text(state).replace(/[^a-z_]/g, '') }, text(state));
}
function num(v) { return el('td', { class: 'num' }, text(v)); }
function age(ts) {
  if (!ts) return '';
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  if (s < 90) return Math.round(s) + 's ago';
  if (s < 5400) return Math.round(s / 60) + 'm ago';
  return Math.round(s / 3600) + 'h ago';
}
function mib(bytes) { return bytes === null || bytes === undefined ? '' : (bytes / 1048576).toFixed(1) + 'Mi'; }
function jobLink(id) { return el('a', { href: '#/job/' + encodeURIComponent(id), 'data-job-link': id }, '#' + id); }

// --- views: each returns the nodes to show; render() swaps them in ---

async function overview() {
  const [s, hosts, formations] = await Promise.all([api('/api/summary'), api('/api/hosts'),
    api('/api/formations')]);
  const card = (label, value, id) => el('div', { class: 'card', 'data-summary': id },
    el('div', { class: 'value' }, text(value)), el('div', { class: 'label' }, label));
  return [
    el('h2', {}, 'Cluster'),
    el('div', { class: 'cards' },
      card('hosts up / total', s.hosts_up + ' / ' + s.hosts_total, 'hosts'),
      card('cpu allocated / total (m)', s.cpu_allocated + ' / ' + s.cpu_total, 'cpu'),
      card('memory allocated / total (Mi)', s.memory_allocated + ' / ' + s.memory_total, 'memory'),
      card('pending', s.jobs_pending, 'pending'), card('assigned', s.jobs_assigned, 'assigned'),
      card('running', s.jobs_running, 'running'), card('succeeded', s.jobs_succeeded, 'succeeded'),
      card('failed', s.jobs_failed, 'failed'), card('cancelled', s.jobs_cancelled, 'cancelled'),
      card('schedulers', s.schedulers, 'schedulers')),
    s.host_loss_held_since ? el('p', { class: 'error' }, 'Host loss held since ' +
      text(s.host_loss_held_since) + ' (' + text(s.host_loss_held_hosts) + ' hosts)') : null,
    el('h2', {}, 'Hosts'), hostsTable(hosts),
    el('h2', {}, 'Formations'), formationsTable(formations),
  ];
}

function hostState(h) {
  if (h.state === 'up' && !h.alive) return 'late';
  return h.state;
}

function hostsTable(hosts) {
  if (!hosts.length) return el('p', { class: 'muted' }, 'No hosts registered.');
  return table(['host', 'state', 'heartbeat', 'cpu free / total (m)', 'memory free / total (Mi)',
    'allocated', 'in use', 'jobs', 'labels', 'driver', 'conditions'],
  hosts.map(h => {
    const conditions = [h.condition, h.suspended ? 'suspended' : null,
      h.admitted ? null : 'not admitted',
      h.beyond_allowance ? 'declares ' + h.beyond_allowance + ' beyond its allowance' : null,
      h.drain_waiting_for ? 'waits for ' + h.drain_waiting_for : null, h.network_note,
      h.driver_note].filter(Boolean).join('; ');
    return [text(h.id), stateCell(hostState(h)),
      h.heartbeat_age_s === null ? '-' : text(h.heartbeat_age_s) + 's',
      num(h.cpu_free + ' / ' + h.cpu), num(h.memory_free + ' / ' + h.memory),
      num(h.cpu_allocated + 'm, ' + h.memory_allocated + 'Mi'),
      num((h.cpu_used === null ? '-' : h.cpu_used + ' cores') + ', ' + (mib(h.memory_used_bytes) || '-')),
      num(h.running_jobs + (h.assigned_jobs ? ' (+' + h.assigned_jobs + ' starting)' : '')),
      JSON.stringify(h.labels || {}), text(h.driver), conditions];
  }), i => ({ 'data-host': hosts[i].id }));
}

function formationsTable(formations) {
  if (!formations.length) return el('p', { class: 'muted' }, 'No formations.');
  return table(['formation', 'kind', 'desired', 'pending', 'running', 'failed', 'healthy',
    'version', 'rollout'],
  formations.map(f => {
    const r = f.latest_rollout;
    let rollout = '';
    if (r) {
      rollout = r.state + ' v' + r.from_version + '\u2192v' + r.version;
      if (!r.finished_at) rollout += ': ' + r.updated + '/' + r.desired + ' updated, ' +
        r.healthy + ' healthy, ' + r.old + ' old' + (r.waiting_for_promotion ? ', waits for promotion' : '');
      if (r.message) rollout += ' (' + r.message + ')';
    }
    return [el('td', {}, el('a', { href: '#/jobs?formation=' + encodeURIComponent(f.name) }, text(f.name))),
      text(f.kind), num(f.desired === null ? '-' : f.desired), num(f.pending + f.assigned),
      num(f.running), num(f.failed), num(f.health_checked ? f.healthy + ' / ' + f.unhealthy + ' unhealthy' : '-'),
      num(f.version), rollout];
  }), i => ({ 'data-formation': formations[i].name }));
}

async function hostsView() { return [el('h2', {}, 'Hosts'), hostsTable(await api('/api/hosts'))]; }
async function formationsView() {
  return [el('h2', {}, 'Formations'), formationsTable(await api('/api/formations'))];
}

const FILTERS = ['state', 'formation', 'host', 'owner'];
const STATES = ['', 'pending', 'assigned', 'running', 'succeeded', 'failed', 'cancelled'];

async function jobsView(params) {
  const q = new URLSearchParams();
  for (const f of FILTERS) if (params.get(f)) q.set(f, params.get(f));
  const jobs = await api('/api/jobs' + (q.toString() ? '?' + q : ''));
  const form = el('form', { class: 'filters', id: 'filters' });
  for (const f of FILTERS) {
    let input;
    if (f === 'state') {
      input = el('select', { name: f }, ...STATES.map(s => el('option', { value: s }, s || 'any')));
    } else {
      input = el('input', { name: f, size: 14, placeholder: 'any' });
    }
    input.value = params.get(f) || '';
    form.appendChild(el('label', {}, f, input));
  }
  form.appendChild(el('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const next = new URLSearchParams();
    for (const f of FILTERS) {
      const v = form.elements[f].value.trim();
      if (v) next.set(f, v);
    }
    location.hash = '#/jobs' + (next.toString() ? '?' + next : '');
  });
  const rows = jobs.map(j => [el('td', {}, jobLink(j.id)), text(j.formation), stateCell(j.state),
    num(j.attempt), text(j.host_id), text(j.owner), (j.command || []).join(' '),
    num(j.cpu + 'm / ' + j.memory + 'Mi'),
    num(j.cpu_used === null ? '' : j.cpu_used + ' cores, ' + mib(j.memory_used_bytes)),
    j.exit_code !== null ? 'exit ' + j.exit_code : (j.signal !== null ? 'signal ' + j.signal : ''),
    age(j.created_at), text(j.error)]);
  return [el('h2', {}, 'Jobs'), form,
    jobs.length ? table(['job', 'formation', 'state', 'attempt', 'host', 'owner', 'command',
      'asks', 'in use', 'exit', 'created', 'error'], rows, i => ({ 'data-job-id': jobs[i].id }))
      : el('p', { class: 'muted', id: 'no-jobs' }, 'No jobs match.')];
}

const LIVE = ['pending', 'assigned', 'running'];

async function jobView(id) {
  const j = await api('/api/jobs/' + encodeURIComponent(id));
  const field = (k, v) => [el('dt', {}, k), el('dd', { 'data-field': k }, text(v))];
  const fields = el('dl', { class: 'fields' },
    ...field('state', j.state), ...field('desired state', j.desired_state),
    ...field('formation', j.formation), ...field('owner', j.owner),
    ...field('command', (j.command || []).join(' ')), ...field('host', j.host_id),
    ...field('attempt', j.attempt + ' of ' + j.max_attempts),
    ...field('exit', j.exit_code !== null ? 'exit code ' + j.exit_code :
      (j.signal !== null ? 'signal ' + j.signal : '')),
    ...field('error', j.error), ...field('created', j.created_at),
    ...field('started', j.started_at), ...field('finished', j.finished_at));
  const spec = {};
  for (const k of ['cpu', 'memory', 'env', 'constraints', 'priority', 'rootfs', 'run_as', 'network',
    'pids_max', 'cpu_hard_limit', 'stop_grace_seconds', 'disk', 'seccomp', 'health_check', 'ports']) {
    if (j[k] !== null && j[k] !== undefined) spec[k] = j[k];
  }
  const attempts = table(['attempt', 'host', 'placed', 'last event'], (j.attempts || []).map(a =>
    [num(a.attempt), text(a.host_id), text(a.assigned_at),
      text(a.last_event) + (a.last_detail ? ': ' + a.last_detail : '')]));
  const events = table(['at', 'attempt', 'event', 'host', 'detail'], (j.events || []).map(e =>
    [text(e.at), num(e.attempt), text(e.kind), text(e.host_id), text(e.detail)]));
  const log = el('pre', { id: 'log' }, '');
  const logNote = el('p', { class: 'muted', id: 'log-note' }, 'loading...');
  loadLog(j.id, log, logNote);
  return [el('h2', {}, 'Job #' + j.id), fields, el('h2', {}, 'Output'), logNote, log,
    el('h2', {}, 'Spec'), el('pre', { id: 'spec' }, JSON.stringify(spec, null, 2)),
    el('h2', {}, 'Attempts'), attempts, el('h2', {}, 'Events'), events];
}

async function loadLog(id, pre, note) {
  try {
    const l = await api('/api/jobs/' + encodeURIComponent(id) + '/log');
    pre.textContent = l.text;
    note.textContent = l.source === 'host' ? 'attempt ' + l.attempt + ', from its host (last 500 lines)'
      : l.source === 'database' ? 'attempt ' + l.attempt + ': the last 4 KiB kept in the database (' + text(l.note) + ')'
        : text(l.note) || 'no output';
    pre.scrollTop = pre.scrollHeight;
  } catch (err) {
    note.textContent = 'output not available: ' + err.message;
  }
}

// --- routing and live updates ---

function route() {
  const hash = location.hash || '#/';
  const [path, query] = hash.slice(1).split('?');
  const params = new URLSearchParams(query || '');
  for (const a of document.querySelectorAll('header nav a')) {
    a.classList.toggle('current', a.getAttribute('href').slice(1) === path.split('/').slice(0, 2).join('/'));
  }
  const m = path.match(/^\/job\/(\d+)$/);
  if (m) return () => jobView(m[1]);
  if (path === '/hosts') return hostsView;
  if (path === '/formations') return formationsView;
  if (path === '/jobs') return () => jobsView(params);
  return overview;
}

let rendering = null;
let again = false;
async function render() {
  if (rendering) { again = true; return rendering; }
  rendering = (async () => {
    do {
      again = false;
      const hash = location.hash;
      try {
        const nodes = await route()();
        if (hash !== location.hash) { again = true; continue; }
        // Keep what the user is typing in the filters.
        const active = document.activeElement;
        if (active && active.form && active.form.id === 'filters' && view.contains(active)) continue;
        view.replaceChildren(...nodes.filter(n => n));
        statusLine.textContent = 'updated ' + new Date().toLocaleTimeString();
      } catch (err) {
        view.replaceChildren(el('p', { class: 'error', id: 'error' }, err.message));
      }
    } while (again);
  })();
  try { await rendering; } finally { rendering = null; }
}

function connect() {
  if (!window.EventSource) return poll();
  const es = new EventSource('/api/events');
  es.addEventListener('hello', () => { live.textContent = 'live'; live.className = 'live on'; });
  es.addEventListener('changed', render);
  es.addEventListener('tick', render);
  es.onerror = () => {
    live.textContent = 'reconnecting'; live.className = 'live off';
  };
}

// No event stream (an old browser): ask every 5 s.
function poll() {
  live.textContent = 'polling'; live.className = 'live off';
  setInterval(render, 5000);
}

window.addEventListener('hashchange', render);
render();
connect();
