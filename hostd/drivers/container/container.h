#pragma once
// The container driver: each job runs isolated in its own namespaces, root
// filesystem and cgroup. docs/containers.md explains the model for operators;
// what must hold, in short:
//
// - Namespaces: new PID, mount, UTS and IPC namespaces for every job; a new
//   network namespace (loopback only) when spec.network == "none", the host's
//   network otherwise. The job's argv is exec'd directly (no shell) as PID 1
//   of its PID namespace, hostname = the job id.
//
// - PID 1 signal semantics: the kernel delivers to a namespace's init only the
//   signals it has a handler for (SIGKILL and SIGSTOP from the host always
//   work). A job that does not handle SIGTERM therefore ignores a polite stop;
//   hostd's supervisor then SIGKILLs the whole cgroup after the grace period.
//   No init shim is interposed: `ps` inside the job shows the job as PID 1.
//
// - Root filesystem: spec.rootfs is a directory (contains '/') or a name
//   resolved to <data_dir>/rootfs/<name> (scripts/make-rootfs builds one). It
//   is bind-mounted read-only (jobs share an image, none may change it for the
//   others), with a fresh /proc, a private tmpfs /tmp, a minimal /dev, and the
//   job's work dir bound read-write at /work (the working directory). Entering
//   it uses pivot_root, never chroot, and the old root is detached.
//
// - No rootfs: the job sees the host's filesystem, recursively read-only, with
//   its work dir writable at its host path (the working directory), a private
//   /tmp, /proc, minimal /dev, and hostd's data dir hidden under an empty
//   tmpfs (other jobs' dirs and logs). Chosen over "the host fs as is" because
//   a job must not be able to change the host, and over "refuse to run"
//   because many jobs just need the host's tools; a job wanting its own files
//   names a rootfs. Needs Linux 5.12+ (mount_setattr) for the recursive
//   read-only bind.
//
// - User: spec.user (a name in the host's passwd, or "uid[:gid]"), default
//   "nobody". Non-root jobs lose every capability (bounding, permitted,
//   effective, inheritable, ambient); root jobs (only when "root" or uid 0 is
//   asked for) keep Docker's default capability set, nothing more. Every job
//   runs with no_new_privs. The work dir is chown'ed to the job's user.
//   Unprivileged jobs run in a user namespace of their own, entered last
//   (after mounts, hostname and loopback, so the host's user namespace owns
//   every other namespace of the job): ids 0..count-1 inside are hostd's
//   --job-ids range (DriverOptions::job_ids) on the host, written by the
//   parent while the child waits (kPaused); run_as names ids inside.
//
// - Cgroup: "pgfleet/<host>/<job>-<attempt>" from the root of each hierarchy
//   (memory, cpu, cpuacct, pids on v1; memory, cpu, pids on v2), see cgroup.h.
//   The child is held on a pipe until the parent has attached it, so nothing
//   the job runs escapes its limits. Wait() reads OOM kills, peak memory and
//   CPU time, kills leftovers and deletes the cgroup; every mount the job had
//   lives in its own mount namespace and goes with it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hostd/drivers/container/cgroup.h"
#include "hostd/drivers/driver.h"

namespace pgfleet::hostd {

// True when this process can run the container driver (root, cgroup controllers memory, cpu,
// cpuacct, pids mounted, libcgroup initialises); else false with *why set.
bool ContainerDriverAvailable(std::string* why);

// Throws DriverError when the driver is not available (see above).
std::unique_ptr<Driver> MakeContainerDriver(const DriverOptions& opts);

// What the cgroup of a job's attempt uses now; nullopt when it has none
// (not the container driver, cgroups not usable, or already deleted).
std::optional<CgroupNow> ReadJobCgroupNow(const std::string& host_id, int64_t job_id, int attempt);

// The cgroup.procs files of the attempt's cgroup, one per hierarchy (writing
// "0" to each moves the writer in: pgfleet exec); empty when cgroups are not
// usable here.
std::vector<std::string> JobCgroupProcsFiles(const std::string& host_id, int64_t job_id,
                                             int attempt);

// hostd's cgroups are pgfleet/<scope>/<host>/<job>-<attempt>, where the
// scope is a hash of hostd's data directory (its real path): two hostds of
// two clusters on one machine, even with the same host id and job ids, never
// share a cgroup, and each removes only what is under its own scope.
// CgroupScopeOf: that hash ("local" for no data dir). SetCgroupScope: this
// process's scope (hostd at start; MakeContainerDriver with a data dir).
std::string CgroupScopeOf(const std::string& data_dir);
void SetCgroupScope(const std::string& data_dir);
// pgfleet/<scope>, and pgfleet/<scope>/<host>, of this process's scope.
std::string ScopeCgroupPath();
std::string HostCgroupPath(const std::string& host_id);
// pgfleet/<scope>/<host>/<job>-<attempt>, of this process's scope.
std::string JobCgroupPath(const std::string& host_id, int64_t job_id, int attempt);
// pgfleet/<scope>/<host> of the hostd whose data dir is given (for tests and tools).
std::string HostCgroupPathFor(const std::string& data_dir, const std::string& host_id);

// Cleaning up after shims that did not (hostd calls these; the container
// driver's own path ends with Wait() deleting the cgroup):
//
// The cgroup of a job's attempt, pgfleet/<scope>/<host>/<job>-<attempt>, once its shim
// is gone: everything still in it is killed and it is deleted. Returns how
// many processes were left in it (0 too when it does not exist, or cgroups
// are not usable here).
int RemoveJobCgroup(const std::string& host_id, int64_t job_id, int attempt);
// Every job cgroup of the host for which shim_alive(job, attempt) is false is
// removed as above; then the per-host group, and "pgfleet", if left empty.
// Returns how many job cgroups were removed.
int RemoveLeftoverCgroups(const std::string& host_id,
                          const std::function<bool(int64_t job_id, int attempt)>& shim_alive);

}  // namespace pgfleet::hostd
