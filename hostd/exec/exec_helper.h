#pragma once
// Running a command inside a job (hostd's exec API, api_exec.cpp): what the
// command must have is read from the job's main process and planned before
// fork (ExecPlan); then a helper process joins the job's cgroup and
// namespaces, enters its root and working directory, and forks the command
// with the job's user, groups and capabilities (RunHelper). After fork the
// helper is the child of a multi-threaded process: it makes only
// async-signal-safe calls, so everything it needs is in the plan.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pgfleet::hostd::exec {

// Everything the helper needs, made before fork.
struct ExecPlan {
  std::vector<int> ns_fds;                // ipc, uts, net, pid, mnt of the job
  // The job's user namespace when it has its own (joined after the others,
  // which the host's user namespace owns); -1 when it shares hostd's.
  int userns_fd = -1;
  std::vector<std::string> cgroup_procs;  // its cgroup.procs files
  int root_fd = -1;                       // its root (containers)
  int cwd_fd = -1;                        // its working directory
  // The job's ids, as its own user namespace sees them (ReadIdentity
  // translates them through its uid_map and gid_map).
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  uint64_t cap_effective = 0, cap_permitted = 0, cap_bounding = ~0ull;
  bool tty = false;  // stdin, stdout and stderr are one terminal: make it the controlling one
  std::vector<std::string> argv_store, env_store;
  std::vector<char*> argv, envp;
  ExecPlan() = default;
  ExecPlan(const ExecPlan&) = delete;
  ExecPlan& operator=(const ExecPlan&) = delete;
  ~ExecPlan();  // closes the descriptors
};

// The job's user, groups and capabilities, from /proc/<pid>/status; false
// when the process is gone. When the job has a user namespace of its own,
// opens it (p->userns_fd) and gives the ids as seen inside it; false too
// when an id has no mapping there.
bool ReadIdentity(pid_t pid, ExecPlan* p);

// The same, as hostd's user namespace sees it (what `pgfleet fs` acts as).
bool ReadHostIdentity(pid_t pid, ExecPlan* p);

// The job's environment, as its main process started with it.
std::vector<std::string> ReadEnvironment(pid_t pid);

// Fills in what a command joins of the job whose main process is `pid`
// (pgfleet exec, health checks): its identity, environment and working
// directory; with own_root (a container job) its namespaces, root and
// cgroup (cgroup_procs: JobCgroupProcsFiles). The command is p->argv_store,
// filled in before. False when the process is gone or its parts cannot be
// opened (it has just ended).
bool PlanInJob(pid_t pid, bool own_root, std::vector<std::string> cgroup_procs, ExecPlan* p);

// In the forked child: closes every other descriptor, joins the job and
// runs the command with in/out/err as its stdin, stdout and stderr; exits
// with the command's status (128 + signal), or 125-127 after writing where
// it gave up to fail_fd (HelperFailure reads it).
[[noreturn]] void RunHelper(const ExecPlan& p, int in_fd, int out_fd, int err_fd, int fail_fd);

// What fail_fd says, in words ("" when the helper did not fail). Reads it.
std::string HelperFailure(int fail_fd);

}  // namespace pgfleet::hostd::exec
