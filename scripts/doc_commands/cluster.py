"""The demo cluster the blocks run against, and resetting it between pages
(scripts/check-doc-commands)."""

import os
import shutil
import signal
import subprocess
import tempfile
import time


RESET_SQL = """
select pgfleet.set_host_state(id, 'up') from pgfleet.hosts where state = 'draining';
select pgfleet.delete_formation(name) from pgfleet.formations
 where deleted_at is null and name <> 'default';
select pgfleet.stop_jobs(array(select id from pgfleet.jobs
                                where state in ('pending', 'assigned', 'running')),
                         'doc-test: next page');
delete from pgfleet.owner_quotas;
delete from pgfleet.role_limits;
"""
# Then, once the stopped jobs have ended, what retention would do later:
# finished jobs and deleted formations go, so a page may create a formation
# of a name an earlier page used.
LIVE_SQL = "select count(*) from pgfleet.jobs where state in ('pending', 'assigned', 'running')"
PRUNE_SQL = """
select pgfleet.prune_finished(interval '0 s', 1000000);
select pgfleet.prune_deleted_formations();
"""


def psql(env_file, root, sql):
    r = subprocess.run(["bash", "-c", f'source "{env_file}" && psql -X -q -At -v ON_ERROR_STOP=1'],
                       input=sql.encode(), cwd=root, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
    return r.returncode == 0, r.stdout.decode("utf-8", "replace")


def reset_cluster(env_file, root):
    ok, out = psql(env_file, root, RESET_SQL)
    if not ok:
        return out
    deadline = time.monotonic() + 15
    while True:
        ok, out = psql(env_file, root, LIVE_SQL)
        if not ok:
            return out
        if out.strip() == "0":
            break
        if time.monotonic() > deadline:
            return f"{out.strip()} jobs still live 15 s after they were stopped"
        time.sleep(0.2)
    ok, out = psql(env_file, root, PRUNE_SQL)
    return None if ok else out


class Demo:
    """scripts/demo's cluster in a private directory."""

    def __init__(self, root, build):
        self.root, self.build = root, build
        parent = os.environ.get("PGFLEET_TEST_TMP") or None
        self.base = tempfile.mkdtemp(prefix="doc-commands.", dir=parent)
        os.chmod(self.base, 0o755)  # the server runs as postgres when we are root
        self.dev = os.path.join(self.base, "dev")
        self.env = dict(os.environ, PGFLEET_DEV_DIR=self.dev, PGFLEET_BUILD_DIR=build,
                        PGFLEET_DEMO_SKIP_BUILD="1", PGFLEET_DRIVER="process")
        for k in ("PGFLEET_DB", "PGFLEET_TOKEN_FILE", "PGHOST", "PGPORT", "PGUSER",
                  "PGDATABASE", "PGFLEET_TEST_DSN"):
            self.env.pop(k, None)
        self.stop_hint = None

    @property
    def env_file(self):
        return os.path.join(self.dev, "env")

    def start(self):
        r = subprocess.run([os.path.join(self.root, "scripts/demo")], env=self.env, cwd=self.root,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
        out = r.stdout.decode("utf-8", "replace")
        if r.returncode != 0:
            return f"scripts/demo exited {r.returncode}\n{out}"
        if not os.path.exists(self.env_file):
            return f"scripts/demo wrote no {self.env_file}\n{out}"
        # The closing hint must name this cluster: followed as written, it
        # stops this one, not ./.pgfleet-dev.
        for line in out.splitlines():
            if "scripts/demo --stop" in line:
                self.stop_hint = line.strip()
        want = f"PGFLEET_DEV_DIR={self.dev} scripts/demo --stop"
        if self.stop_hint != want:
            return f"scripts/demo's closing hint says \"{self.stop_hint}\", not \"{want}\"\n{out}"
        return None

    def stop(self):
        # The hint as a user follows it: in the repository, after the env file.
        cmd = f'source "{self.env_file}" 2>/dev/null; cd "{self.root}"; {self.stop_hint}' \
            if self.stop_hint else f'PGFLEET_DEV_DIR="{self.dev}" scripts/demo --stop'
        env = {k: v for k, v in self.env.items() if k != "PGFLEET_DEV_DIR"}
        try:
            r = subprocess.run(["bash", "-c", cmd], env=env, cwd=self.root, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
            ok = r.returncode == 0
            out = r.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            ok, out = False, "timed out"
        # Whatever is left (a failed stop): the daemons by pid, then the server.
        run_dir = os.path.join(self.dev, "run")
        if os.path.isdir(run_dir):
            for n in os.listdir(run_dir):
                try:
                    os.kill(int(open(os.path.join(run_dir, n)).read().strip()), signal.SIGKILL)
                except (ValueError, OSError):
                    pass
        if os.path.exists(os.path.join(self.dev, "pg/data/postmaster.pid")):
            subprocess.run(["bash", "-c", f'source "{self.root}/scripts/pg-fixture.sh" && '
                            f'pg_fixture_stop "{self.dev}/pg"'], timeout=90)
        subprocess.run(["pkill", "-KILL", "-f", f"shim-launcher [a-z]+ {self.dev}/data/"])
        shutil.rmtree(self.base, ignore_errors=True)
        return None if ok else f"stopping the demo failed: {out}"
