#pragma once
// The container driver's plan (container.h has the model): everything the
// child needs to turn itself into the job, computed in the parent before
// clone() from the RunRequest and the host (its user database, the rootfs,
// the job dir). Building a plan may allocate, throw and log; the child
// (container_child.h) only reads it, because between clone and exec it may
// do nothing else.
//
// Only the container driver (container.cpp) calls BuildPlan; it fills in
// the descriptors (stdin_fd, log_fd, sync_fd) itself.

#include <linux/capability.h>
#include <linux/filter.h>
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "hostd/drivers/driver.h"

namespace pgfleet::hostd::container {

struct DeviceNode {
  const char* name;
  unsigned major;
  unsigned minor;
};
inline constexpr DeviceNode kDevices[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                                          {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
inline constexpr size_t kNumDevices = sizeof(kDevices) / sizeof(kDevices[0]);

// Everything the child needs, computed before clone(): between clone and
// exec the child of a multi-threaded process may only make async-signal-safe
// calls (in practice: plain system calls), so it must not allocate or take
// any lock another thread may have held at clone time. It only reads this
// plan, except that MkdirP edits mask_targets and work_target in place (in
// the child's own copy of memory).
struct ChildPlan {
  std::string root_source;  // rootfs directory, or "/" for the host's filesystem
  std::string new_root;     // mount point the container's root is assembled on
  std::string proc_target, tmp_target, dev_target;
  std::string device_targets[kNumDevices];
  std::string fd_link, stdin_link, stdout_link, stderr_link, shm_link;
  std::string tmp_options;
  // Emptied with a tmpfs inside the new root, parents first: hostd's data dir
  // and, on the host's tree, where sockets and other users' files live.
  std::vector<std::string> mask_targets;
  std::string work_source;  // the job dir on the host
  // The job's disk (container_disk.h): its loop device, mounted as the work
  // dir instead of binding work_source; "" when the job has no disk limit.
  std::string disk_device;
  std::string work_target;  // where it is bound inside the new root
  std::string workdir;      // the job's cwd after pivot_root
  std::string hostname;
  // The job's own /etc/hostname and /etc/hosts (files in its attempt dir's
  // .etc/, bound over the root's): sources and targets, in pairs; a target
  // the root lacks (and cannot get) is left out.
  std::vector<std::string> etc_sources, etc_targets;
  bool loopback_up = false;  // new network namespace: bring up lo, as Docker's "none" does
  // Network "bridge": the child waits (kPaused) while the parent attaches
  // its namespace to the CNI network; the command runs only after.
  bool await_network = false;
  // Loaded last before exec (seccomp_filter.h); null for privileged jobs.
  const std::vector<sock_filter>* seccomp = nullptr;

  std::vector<std::string> argv_store, env_store;
  std::vector<char*> argv, envp;

  // The job's user, groups and capabilities: ids inside its user namespace
  // when it has one (userns), else host ids.
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  // Unprivileged jobs: after entering its root the child makes a user
  // namespace and waits (kPaused) for the parent to map its ids
  // 0..id_range.count-1 onto id_range (container.cpp WriteIdMaps).
  bool userns = false;
  JobIdRange id_range;
  // The job's user and group as the host sees them (its range's ids when
  // it has a user namespace): who owns its work dir.
  uid_t HostUid() const { return userns ? id_range.start + uid : uid; }
  gid_t HostGid() const { return userns ? id_range.start + gid : gid; }
  uint64_t keep_caps = 0;
  int cap_last = CAP_LAST_CAP;

  int stdin_fd = -1;
  int log_fd = -1;
  int sync_fd = -1;  // child's end of the socket pair with the parent
  // What the job sees of its init's command line (/proc/1/cmdline, ps), in
  // place of the shim's, which names hostd's paths and the host: written by
  // the child over its copy of this process's argument area, whose
  // environment area it clears (ProcessStrings; [0, 0) when unknown).
  std::string init_title = "pgfleet-init";
  char* arg_start = nullptr;
  char* arg_end = nullptr;
  char* env_start = nullptr;
  char* env_end = nullptr;
  // Write end of the pipe the container's init writes the job's wait status
  // to (4 bytes) before it exits (container_child.h).
  int status_fd = -1;
};

// What BuildPlan needs to know about the driver.
struct PlanContext {
  std::string data_dir;         // realpath of hostd's data dir ("" when unset)
  JobIdRange job_ids;           // hostd --job-ids
  std::string staging_root;     // empty dir the host-fs root is assembled on
  int cap_last = CAP_LAST_CAP;  // the kernel's highest capability
};

// The plan for req. Throws DriverError naming what is wrong (the command, the
// network, the user, the rootfs, the job dir). May chown the job dir to the
// job's user.
ChildPlan BuildPlan(const RunRequest& req, const PlanContext& context);

// Where this process's command line and environment strings lie
// (/proc/self/stat): sets p's arg_* and env_* (left null when unknown).
void ProcessStrings(ChildPlan* p);

// Whether the plan runs the job in a new network namespace (network "none"
// or "bridge").
bool WantsNewNetwork(const model::JobSpec& spec);

std::string ErrnoText(int err);
// realpath(3) as a string; "" when the path does not resolve.
std::string RealPath(const std::string& path);

}  // namespace pgfleet::hostd::container
