#include "hostd/exec/exec_helper.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/util/text.h"

extern char** environ;

namespace pgfleet::hostd::exec {

ExecPlan::~ExecPlan() {
  for (int fd : ns_fds) close(fd);
  if (userns_fd >= 0) close(userns_fd);
  if (root_fd >= 0) close(root_fd);
  if (cwd_fd >= 0) close(cwd_fd);
}

namespace {

// Where the helper gave up, sent on the failure pipe with errno.
enum Step : int {
  kJoinCgroup = 1,
  kEnterNamespace,
  kEnterRoot,
  kChdir,
  kFork,
  kCredentials,
  kExec
};

const char* StepText(int step) {
  switch (step) {
    case kJoinCgroup:
      return "joining the job's cgroup";
    case kEnterNamespace:
      return "entering the job's namespaces";
    case kEnterRoot:
      return "entering the job's root";
    case kChdir:
      return "entering the job's working directory";
    case kFork:
      return "fork";
    case kCredentials:
      return "taking the job's user and capabilities";
    default:
      return "exec";
  }
}

[[noreturn]] void Fail(int fail_fd, int step, int err) {
  int msg[2] = {step, err};
  ssize_t n = write(fail_fd, msg, sizeof msg);
  (void)n;
  _exit(step == kExec ? (err == ENOENT ? 127 : 126) : 125);
}

[[noreturn]] void RunCommand(const ExecPlan& p, int in_fd, int out_fd, int err_fd, int fail_fd) {
  if (syscall(SYS_setgroups, p.groups.size(), p.groups.data()) != 0 ||
      syscall(SYS_setresgid, p.gid, p.gid, p.gid) != 0) {
    Fail(fail_fd, kCredentials, errno);
  }
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (!(p.cap_bounding & (1ull << cap))) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
  if (syscall(SYS_setresuid, p.uid, p.uid, p.uid) != 0) Fail(fail_fd, kCredentials, errno);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  data[0].effective = static_cast<uint32_t>(p.cap_effective);
  data[1].effective = static_cast<uint32_t>(p.cap_effective >> 32);
  data[0].permitted = static_cast<uint32_t>(p.cap_permitted);
  data[1].permitted = static_cast<uint32_t>(p.cap_permitted >> 32);
  if (syscall(SYS_capset, &header, data) != 0) Fail(fail_fd, kCredentials, errno);
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // after the uid change, which clears it
  if (p.tty && (setsid() < 0 || ioctl(in_fd, TIOCSCTTY, 0) != 0)) Fail(fail_fd, kExec, errno);
  if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
    Fail(fail_fd, kExec, errno);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
  environ = const_cast<char**>(p.envp.data());
  execvp(p.argv[0], const_cast<char* const*>(p.argv.data()));
  Fail(fail_fd, kExec, errno);
}

// Closes every descriptor but `keep` (sorted, at most 16): the helper must not
// hold hostd's sockets and files while the command runs.
void CloseAllBut(int* keep, int n) {
  std::sort(keep, keep + n);
  unsigned from = 3;
  for (int i = 0; i < n; ++i) {
    if (keep[i] < 3) continue;
    if (static_cast<unsigned>(keep[i]) > from) syscall(SYS_close_range, from, keep[i] - 1, 0);
    from = static_cast<unsigned>(keep[i]) + 1;
  }
  syscall(SYS_close_range, from, UINT_MAX, 0);
}

// The helper: joins the job, then forks the command (a process joins a PID
// namespace only through its children) and exits with its status.
}  // namespace

[[noreturn]] void RunHelper(const ExecPlan& p, int in_fd, int out_fd, int err_fd, int fail_fd) {
  int keep[16];
  int n = 0;
  for (int fd : {in_fd, out_fd, err_fd, fail_fd, p.root_fd, p.cwd_fd, p.userns_fd}) {
    if (fd >= 0) keep[n++] = fd;
  }
  for (size_t i = 0; i < p.ns_fds.size() && n < 16; ++i) keep[n++] = p.ns_fds[i];
  CloseAllBut(keep, n);
  for (const auto& file : p.cgroup_procs) {
    int fd = open(file.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, "0", 1) != 1) Fail(fail_fd, kJoinCgroup, errno);
    close(fd);
  }
  for (int fd : p.ns_fds) {
    if (setns(fd, 0) != 0) Fail(fail_fd, kEnterNamespace, errno);
  }
  // Last: once in the job's user namespace, the helper has no capability
  // over the others (the host's user namespace owns them).
  if (p.userns_fd >= 0 && setns(p.userns_fd, CLONE_NEWUSER) != 0) {
    Fail(fail_fd, kEnterNamespace, errno);
  }
  if (p.root_fd >= 0 && (fchdir(p.root_fd) != 0 || chroot(".") != 0)) {
    Fail(fail_fd, kEnterRoot, errno);
  }
  if (fchdir(p.cwd_fd) != 0) Fail(fail_fd, kChdir, errno);
  pid_t child = fork();
  if (child < 0) Fail(fail_fd, kFork, errno);
  if (child == 0) RunCommand(p, in_fd, out_fd, err_fd, fail_fd);
  close(fail_fd);
  close(in_fd);
  close(out_fd);
  close(err_fd);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

namespace {

// One line of a uid_map or gid_map: ids inside..inside+count-1 of the
// process's user namespace are outside.. in ours.
struct IdMapping {
  uint64_t inside = 0, outside = 0, count = 0;
};

std::vector<IdMapping> ReadIdMap(const std::string& path) {
  std::istringstream in(util::ReadFileOrEmpty(path));
  std::vector<IdMapping> out;
  for (IdMapping m; in >> m.inside >> m.outside >> m.count;) out.push_back(m);
  return out;
}

// The id `ours` (in hostd's user namespace) as the job's namespace sees it.
bool ToInside(const std::vector<IdMapping>& map, uint32_t ours, uint32_t* inside) {
  for (const IdMapping& m : map) {
    if (ours >= m.outside && ours - m.outside < m.count) {
      *inside = static_cast<uint32_t>(m.inside + (ours - m.outside));
      return true;
    }
  }
  return false;
}

// Whether the process's user namespace is not ours; opens it into *fd then.
bool OwnUserNamespace(const std::string& proc, int* fd) {
  struct stat mine {}, theirs {};
  if (stat("/proc/self/ns/user", &mine) != 0 || stat((proc + "/ns/user").c_str(), &theirs) != 0) {
    return false;
  }
  if (mine.st_ino == theirs.st_ino && mine.st_dev == theirs.st_dev) return false;
  *fd = open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC);
  return true;
}

}  // namespace

bool ReadIdentity(pid_t pid, ExecPlan* p) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (!ReadHostIdentity(pid, p)) return false;
  if (!OwnUserNamespace(proc, &p->userns_fd)) return true;
  if (p->userns_fd < 0) return false;
  const auto uids = ReadIdMap(proc + "/uid_map"), gids = ReadIdMap(proc + "/gid_map");
  bool ok = ToInside(uids, p->uid, &p->uid) && ToInside(gids, p->gid, &p->gid);
  for (gid_t& g : p->groups) ok = ok && ToInside(gids, g, &g);
  return ok;
}

bool ReadHostIdentity(pid_t pid, ExecPlan* p) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  bool uid = false, gid = false;
  while (std::getline(in, line)) {
    std::istringstream f(line.substr(line.find(':') + 1));
    std::string key = line.substr(0, line.find(':'));
    if (key == "Uid") uid = static_cast<bool>(f >> p->uid);
    if (key == "Gid") gid = static_cast<bool>(f >> p->gid);
    if (key == "Groups") {
      for (gid_t g; f >> g;) p->groups.push_back(g);
    }
    if (key == "CapEff") f >> std::hex >> p->cap_effective;
    if (key == "CapPrm") f >> std::hex >> p->cap_permitted;
    if (key == "CapBnd") f >> std::hex >> p->cap_bounding;
  }
  return uid && gid;
}

std::vector<std::string> ReadEnvironment(pid_t pid) {
  std::string all = util::ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/environ");
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < all.size()) {
    size_t end = all.find('\0', pos);
    if (end == std::string::npos) end = all.size();
    if (end > pos) out.push_back(all.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

bool PlanInJob(pid_t pid, bool own_root, std::vector<std::string> cgroup_procs, ExecPlan* p) {
  const std::string proc = "/proc/" + std::to_string(pid);
  if (!ReadIdentity(pid, p)) return false;
  p->env_store = ReadEnvironment(pid);
  p->cwd_fd = open((proc + "/cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (own_root) {
    for (const char* ns : {"ipc", "uts", "net", "pid", "mnt"}) {
      int fd = open((proc + "/ns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) p->ns_fds.push_back(fd);
    }
    p->root_fd = open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    p->cgroup_procs = std::move(cgroup_procs);
    if (p->ns_fds.size() != 5 || p->root_fd < 0 || p->cgroup_procs.empty()) return false;
  }
  if (p->cwd_fd < 0) return false;
  for (auto& a : p->argv_store) p->argv.push_back(a.data());
  p->argv.push_back(nullptr);
  for (auto& e : p->env_store) p->envp.push_back(e.data());
  p->envp.push_back(nullptr);
  return true;
}

std::string HelperFailure(int fail_fd) {
  int msg[2] = {0, 0};
  if (read(fail_fd, msg, sizeof msg) != static_cast<ssize_t>(sizeof msg)) return "";
  return std::string("pgfleet exec: ") + StepText(msg[0]) + ": " + std::strerror(msg[1]) + "\n";
}

}  // namespace pgfleet::hostd::exec
