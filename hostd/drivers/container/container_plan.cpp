#include "hostd/drivers/container/container_plan.h"

#include "core/model/constants.h"
#include "hostd/drivers/container/seccomp_filter.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <sstream>

namespace pgfleet::hostd::container {
namespace {

constexpr const char* kDefaultUser = "nobody";

// Docker's default capability set: what a job running as root keeps. Enough
// for package managers and daemons that drop privileges; not enough to mount,
// load modules, trace other processes or change the clock.
constexpr uint64_t kRootCapabilities =
    (1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FOWNER) | (1ULL << CAP_FSETID) |
    (1ULL << CAP_KILL) | (1ULL << CAP_SETGID) | (1ULL << CAP_SETUID) | (1ULL << CAP_SETPCAP) |
    (1ULL << CAP_NET_BIND_SERVICE) | (1ULL << CAP_NET_RAW) | (1ULL << CAP_SYS_CHROOT) |
    (1ULL << CAP_MKNOD) | (1ULL << CAP_AUDIT_WRITE) | (1ULL << CAP_SETFCAP);

// What a job on the host's tree does not see (an empty tmpfs instead).
constexpr const char* kHostTreeMasks[] = {"/run", "/var/run", "/var/tmp", "/home", "/root",
                                          "/var/lib/postgresql", "/var/spool", "/var/mail",
                                          "/mnt", "/media"};

bool AllDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// A uid or gid of a job's user: decimal, at most model::kMaxJobUserId, so no
// number wraps to another id (4294967296 is 0 as a uid_t).
uint32_t ParseId(const std::string& digits, const std::string& user) {
  if (!AllDigits(digits) || digits.size() > 10 ||
      std::stoull(digits) > static_cast<unsigned long long>(model::kMaxJobUserId)) {
    throw DriverError("user ids must be at most " + std::to_string(model::kMaxJobUserId) +
                      " (got \"" + user + "\")");
  }
  return static_cast<uint32_t>(std::stoull(digits));
}

// Defence in depth behind the database's rules: whatever a name or number
// resolves to on this host, an unprivileged job holds neither uid 0 nor gid 0
// (as its group or one of its groups).
void RefuseRootIdentity(const std::string& user, const ChildPlan& plan) {
  if (plan.uid == 0) {
    throw DriverError("user \"" + user +
                      "\" is uid 0 (root) on this host: only privileged jobs may run as root");
  }
  bool root_group = plan.gid == 0;
  for (gid_t g : plan.groups) root_group = root_group || g == 0;
  if (root_group) {
    throw DriverError("user \"" + user +
                      "\" is in group 0 (root) on this host: only privileged jobs may run so");
  }
}

// Unprivileged jobs live in a user namespace of range.count ids: the user and
// every group must be one of them.
void RequireNamespaceIds(const std::string& user, const ChildPlan& plan) {
  auto outside = [&plan](uint32_t id) { return id >= plan.id_range.count; };
  std::string what;
  if (outside(plan.uid)) what = "uid " + std::to_string(plan.uid);
  if (what.empty() && outside(plan.gid)) what = "gid " + std::to_string(plan.gid);
  for (gid_t g : plan.groups) {
    if (what.empty() && outside(g)) what = "in group " + std::to_string(g);
  }
  if (!what.empty()) {
    throw DriverError("user \"" + user + "\" is " + what +
                      ": an unprivileged job's ids must be below " +
                      std::to_string(plan.id_range.count) + " (its user namespace)");
  }
}

// Resolves spec.user against the host's user database (before any pivot:
// the job's rootfs may have no passwd at all, and must not choose our uids).
// For an unprivileged job the ids found are ids inside its user namespace:
// "postgres" is uid 105 there, which is no host account.
void ResolveUser(const std::string& requested, bool privileged, const JobIdRange& range,
                 ChildPlan* plan) {
  std::string user = requested.empty() ? kDefaultUser : requested;
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* found = nullptr;
  std::string uid_part = user, gid_part;
  if (size_t colon = user.find(':'); colon != std::string::npos) {
    uid_part = user.substr(0, colon);
    gid_part = user.substr(colon + 1);
    if (!AllDigits(uid_part) || !AllDigits(gid_part)) {
      throw DriverError("user must be a name or uid[:gid] (got \"" + user + "\")");
    }
  }
  if (AllDigits(uid_part)) {
    plan->uid = ParseId(uid_part, user);
    getpwuid_r(plan->uid, &pw, buf.data(), buf.size(), &found);
    plan->gid = !gid_part.empty() ? ParseId(gid_part, user)
                : found           ? found->pw_gid
                                  : static_cast<gid_t>(plan->uid);
    plan->groups = {plan->gid};
  } else {
    int rc = getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found);
    if (!found) {
      throw DriverError("user \"" + user + "\" does not exist on host" +
                        (rc ? ": " + ErrnoText(rc) : std::string()));
    }
    plan->uid = found->pw_uid;
    plan->gid = found->pw_gid;
    int n = 32;
    std::vector<gid_t> groups(n);
    while (getgrouplist(user.c_str(), plan->gid, groups.data(), &n) < 0) groups.resize(n);
    groups.resize(n);
    plan->groups = groups;
  }
  if (!privileged) {
    RefuseRootIdentity(user, *plan);
    plan->userns = true;
    plan->id_range = range;
    RequireNamespaceIds(user, *plan);
  }
  plan->keep_caps = plan->uid == 0 ? kRootCapabilities : 0;
}

std::string ResolveRootfs(const std::string& rootfs, const std::string& data_dir) {
  std::string path = rootfs;
  if (rootfs.find('/') == std::string::npos) {
    if (data_dir.empty()) {
      throw DriverError("rootfs \"" + rootfs + "\" is a name but hostd has no data dir");
    }
    path = data_dir + "/rootfs/" + rootfs;
  }
  std::string real = RealPath(path);
  struct stat st {};
  if (real.empty() || stat(real.c_str(), &st) != 0) {
    throw DriverError("rootfs \"" + rootfs + "\" not found: " + path + ": " + ErrnoText(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    throw DriverError("rootfs \"" + rootfs + "\" is not a directory: " + real);
  }
  if (real == "/")
    throw DriverError("rootfs \"" + rootfs + "\" is the host's root; leave rootfs empty");
  return real;
}

// The job dir, owned by the job's user: where it works, whoever it runs as.
void PlanWorkDir(const RunRequest& req, ChildPlan* p) {
  p->work_source = RealPath(req.job_dir);
  struct stat st {};
  if (p->work_source.empty() || stat(p->work_source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw DriverError("job dir " + req.job_dir + " is missing: " + ErrnoText(errno));
  }
  // On the host, a namespaced job's ids are its range's.
  const uid_t owner = p->HostUid();
  const gid_t group = p->HostGid();
  if ((p->userns || p->uid != 0) && (st.st_uid != owner || st.st_gid != group) &&
      chown(p->work_source.c_str(), owner, group) != 0) {
    throw DriverError("cannot give job dir " + p->work_source + " to uid " +
                      std::to_string(owner) + ": " + ErrnoText(errno));
  }
}

// Where the root comes from and where the work dir goes in it.
void PlanRoot(const model::JobSpec& spec, const PlanContext& context, ChildPlan* p) {
  if (spec.rootfs.empty()) {
    // The host's filesystem, read-only, assembled on an empty staging dir.
    p->root_source = "/";
    p->new_root = context.staging_root;
    p->work_target = p->new_root + p->work_source;
    p->workdir = p->work_source;
    // Hidden: hostd's data dir (other jobs, tickets), and where the host keeps
    // sockets (a read-only mount does not stop connect(): PostgreSQL's,
    // a container runtime's, the system bus) and its users' files, from
    // unprivileged jobs (privileged ones see the host as before). Only real
    // directories: a mount on a link (/var/run) would follow it.
    std::vector<std::string> masks;
    if (!spec.privileged) masks.assign(std::begin(kHostTreeMasks), std::end(kHostTreeMasks));
    if (!context.data_dir.empty() && context.data_dir != "/") masks.push_back(context.data_dir);
    std::sort(masks.begin(), masks.end());  // a parent before what is under it
    for (const auto& m : masks) {
      struct stat st {};
      if (lstat(m.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) p->mask_targets.push_back(p->new_root + m);
    }
  } else {
    p->root_source = ResolveRootfs(spec.rootfs, context.data_dir);
    p->new_root = p->root_source;  // bound onto itself: it becomes a mount point
    for (const char* d : {"/proc", "/tmp", "/dev", "/work"}) {
      mkdir((p->new_root + d).c_str(), 0755);  // make-rootfs has them; a bare tree may not
    }
    p->work_target = p->new_root + "/work";
    p->workdir = "/work";
  }
}

// /proc, /tmp and /dev inside the new root.
void PlanMounts(const model::JobSpec& spec, ChildPlan* p) {
  p->proc_target = p->new_root + "/proc";
  p->tmp_target = p->new_root + "/tmp";
  p->dev_target = p->new_root + "/dev";
  for (size_t i = 0; i < kNumDevices; ++i) {
    p->device_targets[i] = p->dev_target + "/" + kDevices[i].name;
  }
  p->fd_link = p->dev_target + "/fd";
  p->stdin_link = p->dev_target + "/stdin";
  p->stdout_link = p->dev_target + "/stdout";
  p->stderr_link = p->dev_target + "/stderr";
  p->shm_link = p->dev_target + "/shm";
  // tmpfs pages are charged to the job's memory cgroup anyway; the size cap
  // just gives a clear ENOSPC instead of an OOM kill for a runaway writer.
  p->tmp_options = "mode=1777,size=" + std::to_string(spec.memory) + "m";
}

// /etc/hostname (the job's hostname) and /etc/hosts (localhost, and the
// hostname on 127.0.1.1, as Debian writes them) of the job's own, as Docker
// gives each container: written in the attempt dir's .etc/ (out of the job's
// reach: a file it could replace would be one hostd writes), bound over the
// root's files in the child. A named rootfs gets empty files to bind over
// when it has none; the host's root ("/") is left as it is where it lacks one.
void PlanEtcFiles(const RunRequest& req, ChildPlan* p) {
  const model::JobSpec& spec = req.spec;
  if (req.attempt_dir.empty()) throw DriverError("no attempt directory for the job's /etc files");
  const std::string dir = req.attempt_dir + "/.etc";
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw DriverError("cannot make " + dir + ": " + ErrnoText(errno));
  }
  const std::pair<const char*, std::string> files[] = {
      {"hostname", p->hostname + "\n"},
      {"hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" +
                    p->hostname + "\n"}};
  for (const auto& [name, content] : files) {
    std::string source = dir + "/" + name;
    std::string target = p->new_root + "/etc/" + name;
    if (!spec.rootfs.empty()) {
      mkdir((p->new_root + "/etc").c_str(), 0755);
      int made = open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (made >= 0) close(made);
    }
    struct stat st {};
    // Not for a target that is not a plain file (a symlink could point anywhere).
    if (lstat((spec.rootfs.empty() ? "/etc/" + std::string(name) : target).c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    int fd = open(source.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 ||
        write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
      int err = errno;
      if (fd >= 0) close(fd);
      throw DriverError("cannot write " + source + ": " + ErrnoText(err));
    }
    close(fd);
    p->etc_sources.push_back(source);
    p->etc_targets.push_back(target);
  }
}

}  // namespace

std::string ErrnoText(int err) { return std::strerror(err); }

std::string RealPath(const std::string& path) {
  char* r = realpath(path.c_str(), nullptr);
  if (!r) return {};
  std::string s = r;
  std::free(r);
  return s;
}

bool WantsNewNetwork(const model::JobSpec& spec) {
  return spec.network == "none" || spec.network == "bridge";
}

void ProcessStrings(ChildPlan* p) {
  std::ifstream in("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return;
  std::istringstream fields(stat.substr(close + 2));  // from field 3 (state) on
  std::vector<std::string> f;
  for (std::string w; fields >> w;) f.push_back(w);
  // Fields 48-51 (1-based): arg_start, arg_end, env_start, env_end.
  if (f.size() < 49) return;
  auto at = [&](size_t field) {
    return reinterpret_cast<char*>(static_cast<uintptr_t>(std::stoull(f[field - 3])));
  };
  char* a0 = at(48);
  char* a1 = at(49);
  char* e0 = at(50);
  char* e1 = at(51);
  if (a0 && a1 > a0) p->arg_start = a0, p->arg_end = a1;
  if (e0 && e1 > e0) p->env_start = e0, p->env_end = e1;
}

ChildPlan BuildPlan(const RunRequest& req, const PlanContext& context) {
  const model::JobSpec& spec = req.spec;
  if (spec.command.empty() || spec.command[0].empty()) {
    throw DriverError("command must not be empty");
  }
  if (!WantsNewNetwork(spec) && !spec.network.empty() && spec.network != "host") {
    throw DriverError("network must be \"host\", \"none\" or \"bridge\" (got \"" + spec.network +
                      "\")");
  }
  ChildPlan p;
  ProcessStrings(&p);
  ResolveUser(spec.user, spec.privileged, context.job_ids, &p);
  p.cap_last = context.cap_last;
  PlanWorkDir(req, &p);
  PlanRoot(spec, context, &p);
  PlanMounts(spec, &p);
  p.hostname = std::to_string(req.job_id);
  PlanEtcFiles(req, &p);
  p.loopback_up = WantsNewNetwork(spec);
  p.await_network = spec.network == "bridge";
  // Every job but a privileged one that opted out (PrivilegeProblem keeps
  // "unconfined" to privileged jobs).
  if (spec.seccomp != "unconfined" || !spec.privileged) p.seccomp = &DefaultSeccompProgram();

  p.argv_store = spec.command;
  for (auto& a : p.argv_store) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  p.env_store = JobEnvironment(req);
  for (auto& e : p.env_store) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  return p;
}

}  // namespace pgfleet::hostd::container
