// Throughput of graphile-worker, the peer job queue, in its batched mode.
// bench/peer/graphile.sh copies this file next to a node_modules holding
// graphile-worker and runs it there; see that script for the options.
//   node graphile-bench.mjs --db DSN --jobs N --workers W --concurrency C
//   [--pg-pid PID]   the PostgreSQL postmaster's pid: also what the server's
//                    processes spent on CPU while jobs went in and ran
// Prints one JSON line: {"version", "jobs", "seconds", "enqueue_seconds"} and
// with --pg-pid "pg_cpu_enqueue_s", "pg_cpu_s".
// `seconds` runs from telling the (already started, connected) worker
// processes to go until graphile_worker._private_jobs holds no job.
import { execFileSync, fork } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Logger, run, runMigrations } from "graphile-worker";

const self = fileURLToPath(import.meta.url);
const args = parseArgs(process.argv.slice(2));
const children = [];

// Errors only: graphile-worker logs every job at info level otherwise.
const logger = new Logger(() => (level, message) => {
  if (level === "error") console.error(`graphile-worker: ${message}`);
});

// A pool with the error handlers graphile-worker asks for.
function makePool(dsn, max, who) {
  const pool = new pg.Pool(pgConfig(dsn, max));
  const report = (e) => console.error(`${who}: ${e.message}`);
  pool.on("error", report);
  pool.on("connect", (client) => client.on("error", report));
  return pool;
}

// A libpq DSN (key=value pairs or a postgres:// URI) as a node-postgres config.
function pgConfig(dsn, max) {
  if (/^postgres(ql)?:\/\//.test(dsn)) return { connectionString: dsn, max };
  const keys = { host: "host", hostaddr: "host", port: "port", user: "user",
                 dbname: "database", password: "password" };
  const config = { max };
  const re = /\s*(\w+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S*))/g;
  for (const m of dsn.matchAll(re)) {
    const value = m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3];
    if (keys[m[1]]) config[keys[m[1]]] = m[1] === "port" ? Number(value) : value;
  }
  return config;
}

// CPU seconds the PostgreSQL server's processes used so far: the postmaster's
// own and its ended children's (utime, stime, cutime, cstime), and those of
// its children alive now (as bench/e2e's pg_ticks). Null without --pg-pid.
let ticksPerSecond = 0;
function pgCpuSeconds() {
  const pm = args["pg-pid"];
  if (!pm) return null;
  if (!ticksPerSecond) ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"]).toString());
  const fields = (pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      return stat.slice(stat.lastIndexOf(")") + 2).split(" ").map(Number);
    } catch {
      return null;  // a child that ended meanwhile: its time is in the postmaster's cutime
    }
  };
  const own = fields(pm);
  if (!own) throw new Error(`--pg-pid ${pm}: no such process`);
  let ticks = own[11] + own[12] + own[13] + own[14];
  const children = readFileSync(`/proc/${pm}/task/${pm}/children`, "utf8").trim();
  for (const child of children ? children.split(" ") : []) {
    const f = fields(child);
    if (f) ticks += f[11] + f[12];
  }
  return ticks / ticksPerSecond;
}

function parseArgs(argv) {
  const out = { db: "", jobs: 100000, workers: 4, concurrency: 24, timeout: 900, role: "main",
                "pg-pid": 0 };
  for (let i = 0; i < argv.length; i++) {
    const key = argv[i].replace(/^--/, "");
    if (key === "worker") { out.role = "worker"; continue; }
    if (!(key in out) || i + 1 >= argv.length) throw new Error(`bad argument ${argv[i]}`);
    out[key] = key === "db" ? argv[++i] : Number(argv[++i]);
  }
  if (!out.db) throw new Error("--db is required");
  return out;
}

// The batched configuration of graphile-worker's own perfTest: a local queue
// that locks 500 jobs per fetch, and batched completions and failures.
const preset = {
  worker: {
    localQueue: { size: 500, refetchDelay: { durationMs: 10 } },
    completeJobBatchDelay: 0,
    failJobBatchDelay: 0,
  },
};

async function worker() {
  process.on("disconnect", () => process.exit(1)); // the main process is gone
  const pool = makePool(args.db, args.concurrency + 1, "graphile-bench worker");
  await pool.query("select 1");
  let ran = 0;
  process.send("ready");
  await new Promise((resolve) => process.once("message", resolve));
  const runner = await run({
    pgPool: pool, concurrency: args.concurrency, noHandleSignals: true, logger, preset,
    taskList: { noop: async () => { ran++; } },
  });
  await new Promise((resolve) => process.once("message", resolve));
  await runner.stop();
  process.send({ ran });
  await pool.end();
  process.exit(0);
}

async function main() {
  const pool = makePool(args.db, 2, "graphile-bench");
  await runMigrations({ pgPool: pool, logger });
  const left = `select count(*)::int as n from graphile_worker._private_jobs`;
  const before = (await pool.query(left)).rows[0].n;
  if (before > 0) throw new Error(`graphile_worker already holds ${before} jobs; use an empty database`);

  // Jobs go in before the clock starts, with one statement (as perfTest does).
  const cpuStart = pgCpuSeconds();
  let t = performance.now();
  await pool.query(
    `select graphile_worker.add_jobs(array(
       select row('noop', json_build_object('id', i), null, null, null, null, null, null)::graphile_worker.job_spec
         from generate_series(1, $1::int) i))`, [args.jobs]);
  const enqueueSeconds = (performance.now() - t) / 1000;
  const cpuEnqueued = pgCpuSeconds();

  for (let i = 0; i < args.workers; i++) {
    const child = fork(self, [...process.argv.slice(2), "--worker"]);
    child.ready = new Promise((resolve) => child.once("message", resolve));
    child.done = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
    child.ran = 0;
    child.on("message", (m) => { if (m && typeof m.ran === "number") child.ran = m.ran; });
    children.push(child);
  }
  let stopping = false;
  const crashed = Promise.race(children.map((c) => c.done)).then((code) => {
    if (!stopping) throw new Error(`a worker process exited early (code ${code})`);
  });
  await Promise.race([Promise.all(children.map((c) => c.ready)), crashed]);

  const cpuGo = pgCpuSeconds();
  t = performance.now();
  for (const child of children) child.send("go");
  const deadline = t + args.timeout * 1000;
  const exists = `select exists (select 1 from graphile_worker._private_jobs) as any`;
  for (;;) {
    if (!(await pool.query(exists)).rows[0].any) break;
    if (performance.now() > deadline) throw new Error(`jobs left after ${args.timeout} s`);
    await Promise.race([new Promise((resolve) => setTimeout(resolve, 20)), crashed]);
  }
  const seconds = (performance.now() - t) / 1000;
  const cpuDone = pgCpuSeconds();
  stopping = true;
  for (const child of children) child.send("stop");
  const codes = await Promise.all(children.map((c) => c.done));
  await pool.end();
  if (codes.some((code) => code !== 0)) throw new Error(`worker exit codes ${codes}`);
  const ran = children.reduce((sum, c) => sum + c.ran, 0);
  if (ran !== args.jobs) throw new Error(`workers ran ${ran} jobs, expected ${args.jobs}`);

  const pkg = new URL("./node_modules/graphile-worker/package.json", import.meta.url);
  const version = JSON.parse(readFileSync(pkg, "utf8")).version;
  const result = { version, jobs: args.jobs, seconds, enqueue_seconds: enqueueSeconds };
  if (cpuStart !== null) {
    result.pg_cpu_enqueue_s = cpuEnqueued - cpuStart;
    result.pg_cpu_s = cpuDone - cpuGo;
  }
  console.log(JSON.stringify(result));
}

(args.role === "worker" ? worker() : main()).catch((e) => {
  console.error(`graphile-bench: ${e.message}`);
  for (const child of children) child.kill("SIGKILL");
  process.exit(1);
});
