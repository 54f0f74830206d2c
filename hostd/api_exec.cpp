// POST /v1/jobs/{id}/exec?arg=CMD&arg=ARG...[&attempt=N]: runs a command
// inside a running job (pgfleet exec). The request body is the command's
// stdin (up to the API's 1 MiB). The answer streams the command's output as
// frames, then its exit code:
//   "o <n>\n" + n bytes of stdout;  "e <n>\n" + n bytes of stderr;  "x <code>\n" (last)
// (code: the exit code, or 128 + the signal that killed it; 126/127 when it
// could not be run, with the reason on stderr).
//
// "Inside" means what the job has: a container job's cgroup (so its limits
// count the command too), its IPC, UTS, network, PID and mount namespaces,
// its root and working directory, its user, groups and capabilities, no new
// privileges, and its environment; a process driver job's working directory,
// user and environment. The command dies with the request: a client that
// goes away takes it down (the helper is SIGKILLed, the command has
// PR_SET_PDEATHSIG).

#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/util/text.h"
#include "hostd/api_routes.h"
#include "hostd/drivers/container.h"

extern char** environ;

namespace pgfleet::hostd::routes {
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

// Everything the helper needs, made before fork: after it, in a child of a
// multi-threaded process, only async-signal-safe calls are made.
struct ExecPlan {
  std::vector<int> ns_fds;                // ipc, uts, net, pid, mnt of the job
  std::vector<std::string> cgroup_procs;  // its cgroup.procs files
  int root_fd = -1;                       // its root (containers)
  int cwd_fd = -1;                        // its working directory
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  uint64_t cap_effective = 0, cap_permitted = 0, cap_bounding = ~0ull;
  std::vector<std::string> argv_store, env_store;
  std::vector<char*> argv, envp;
  ~ExecPlan() {
    for (int fd : ns_fds) close(fd);
    if (root_fd >= 0) close(root_fd);
    if (cwd_fd >= 0) close(cwd_fd);
  }
};

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
[[noreturn]] void Helper(const ExecPlan& p, int in_fd, int out_fd, int err_fd, int fail_fd) {
  int keep[16];
  int n = 0;
  for (int fd : {in_fd, out_fd, err_fd, fail_fd, p.root_fd, p.cwd_fd}) {
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

// "Uid:\t1000\t1000..." style fields of /proc/<pid>/status.
bool ReadIdentity(pid_t pid, ExecPlan* p) {
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

// The job's environment, as its main process started with it.
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

// One running command: its helper, the pipes to it, what is left to send.
struct Session {
  pid_t helper = -1;
  int in = -1, out = -1, err = -1, fail = -1;
  std::string stdin_left;
  bool reaped = false;
  ~Session() {
    if (!reaped && helper > 0) {
      kill(helper, SIGKILL);  // the client went away: the command goes too (PDEATHSIG)
      while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    for (int fd : {in, out, err, fail}) {
      if (fd >= 0) close(fd);
    }
  }
};

std::string Frame(char kind, const char* data, size_t n) {
  std::string f = std::string(1, kind) + " " + std::to_string(n) + "\n";
  f.append(data, n);
  return f;
}

// Moves what is ready between the pipes and the answer, for up to ~1 s.
// False when the client is gone.
bool Pump(Session& s, httplib::DataSink& sink) {
  for (int round = 0; round < 20; ++round) {
    if (s.out < 0 && s.err < 0) {
      int status = 0;
      while (waitpid(s.helper, &status, 0) < 0 && errno == EINTR) {
      }
      s.reaped = true;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      int msg[2] = {0, 0};
      if (read(s.fail, msg, sizeof msg) == static_cast<ssize_t>(sizeof msg)) {
        std::string why =
            std::string("pgfleet exec: ") + StepText(msg[0]) + ": " + std::strerror(msg[1]) + "\n";
        std::string f = Frame('e', why.data(), why.size());
        if (!sink.write(f.data(), f.size())) return false;
      }
      std::string end = "x " + std::to_string(code) + "\n";
      if (!sink.write(end.data(), end.size())) return false;
      sink.done();
      return true;
    }
    pollfd fds[3] = {{s.out, POLLIN, 0}, {s.err, POLLIN, 0}, {s.in, POLLOUT, 0}};
    int n = poll(fds, s.in >= 0 ? 3 : 2, 50);
    if (n < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? s.out : s.err;
      if (fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      ssize_t got = read(fd, buf, sizeof buf);
      if (got > 0) {
        std::string f = Frame(i == 0 ? 'o' : 'e', buf, static_cast<size_t>(got));
        if (!sink.write(f.data(), f.size())) return false;
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fd);
        fd = -1;
      }
    }
    if (s.in >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t put = write(s.in, s.stdin_left.data(), s.stdin_left.size());
      if (put > 0) s.stdin_left.erase(0, static_cast<size_t>(put));
      if (s.stdin_left.empty() || (put < 0 && errno != EAGAIN && errno != EINTR)) {
        close(s.in);  // all sent (or the command stopped reading): EOF on its stdin
        s.in = -1;
      }
    }
  }
  return sink.is_writable();
}

}  // namespace

void HandleExec(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  int attempt;
  auto plan = std::make_shared<ExecPlan>();
  try {
    attempt = IntParam(req, "attempt");
    size_t n = req.get_param_value_count("arg");
    if (n == 0) throw model::SpecError("arg", "arg: give the command as arg=CMD&arg=ARG...");
    if (n > 1024) throw model::SpecError("arg", "arg: at most 1024 arguments");
    for (size_t i = 0; i < n; ++i) {
      std::string a = req.get_param_value("arg", i);
      if (a.find('\0') != std::string::npos || (i == 0 && a.empty())) {
        throw model::SpecError("arg", "arg: the command must be non-empty, without NUL bytes");
      }
      plan->argv_store.push_back(a);
    }
  } catch (const model::SpecError& e) {
    return net::ErrorResponse(res, 400, e.what());
  }
  if (!AuthorizeJobRequest(api, req, res, net::TicketKind::kExec, id, &attempt)) return;
  if (!api.supervisor.RunsProcesses()) {
    return net::ErrorResponse(
        res, 404,
        "job " + std::to_string(id) + " runs no process: this host is simulated (driver sim)");
  }
  auto info = api.supervisor.Attempt(id, attempt < 0 ? 0 : attempt);
  if (!info || info->pid <= 0 || !api.supervisor.Live(info->job_id, info->attempt)) {
    return net::ErrorResponse(res, 409,
                              "job " + std::to_string(id) +
                                  " is not running on this host: exec runs commands in "
                                  "a running job only");
  }
  const pid_t pid = info->pid;
  const std::string proc = "/proc/" + std::to_string(pid);
  if (!ReadIdentity(pid, plan.get())) {
    return net::ErrorResponse(res, 409, "job " + std::to_string(id) + " has just ended");
  }
  plan->env_store = ReadEnvironment(pid);
  plan->cwd_fd = open((proc + "/cwd").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (api.supervisor.driver() == "container") {
    for (const char* ns : {"ipc", "uts", "net", "pid", "mnt"}) {
      int fd = open((proc + "/ns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) plan->ns_fds.push_back(fd);
    }
    plan->root_fd = open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    plan->cgroup_procs = JobCgroupProcsFiles(api.agent.Config().id, info->job_id, info->attempt);
    if (plan->ns_fds.size() != 5 || plan->root_fd < 0 || plan->cgroup_procs.empty()) {
      return net::ErrorResponse(res, 409, "job " + std::to_string(id) + " has just ended");
    }
  }
  if (plan->cwd_fd < 0) {
    return net::ErrorResponse(res, 409, "job " + std::to_string(id) + " has just ended");
  }
  for (auto& a : plan->argv_store) plan->argv.push_back(a.data());
  plan->argv.push_back(nullptr);
  for (auto& e : plan->env_store) plan->envp.push_back(e.data());
  plan->envp.push_back(nullptr);

  int pipes[4][2];
  for (int i = 0; i < 4; ++i) {
    if (pipe2(pipes[i], O_CLOEXEC) != 0) {
      int e = errno;
      for (int j = 0; j < i; ++j) {
        close(pipes[j][0]);
        close(pipes[j][1]);
      }
      return net::ErrorResponse(res, 500, std::string("pipe: ") + strerror(e));
    }
  }
  int* in = pipes[0];
  int* out = pipes[1];
  int* err = pipes[2];
  int* fail = pipes[3];
  pid_t helper = fork();
  if (helper == 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    close(fail[0]);
    Helper(*plan, in[0], out[1], err[1], fail[1]);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  close(fail[1]);
  auto s = std::make_shared<Session>();
  s->in = in[1];
  s->out = out[0];
  s->err = err[0];
  s->fail = fail[0];
  if (helper < 0) return net::ErrorResponse(res, 500, std::string("fork: ") + strerror(errno));
  s->helper = helper;
  for (int fd : {s->in, s->out, s->err}) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  s->stdin_left = req.body;
  if (s->stdin_left.empty()) {
    close(s->in);
    s->in = -1;
  }
  api.metrics.Add("pgfleet_host_api_execs_total", 1);
  std::function<void()> touch = api.guard ? api.guard->Toucher(req) : [] {};
  res.set_chunked_content_provider("application/x-pgfleet-exec",
                                   [s, touch](size_t, httplib::DataSink& sink) {
                                     touch();
                                     return Pump(*s, sink);
                                   });
}

}  // namespace pgfleet::hostd::routes
