// POST /v1/jobs/{id}/exec?arg=CMD&arg=ARG...[&attempt=N][&stdin=stream]
// [&tty=1&rows=R&cols=C]: runs a command inside a running job (pgfleet exec).
// The request body is the command's stdin (up to the API's 1 MiB), unless
// stdin=stream: then the answer's first frame names a session, and stdin
// comes in later requests, as long as the command runs:
//   POST /v1/jobs/{id}/exec/stdin[?eof=1][&rows=R&cols=C]
//   X-Pgfleet-Exec-Session: <session>      body: the next bytes of stdin
// (at most 1 MiB waiting: 503 until the command has read it; eof=1 closes
// its stdin; rows/cols resize its terminal). The session is the capability:
// 128 random bits, told only to whoever started the command. tty=1 runs the
// command on a new pseudo-terminal (its controlling terminal, stdin, stdout
// and stderr), of rows x cols (default 24 x 80), as `pgfleet exec -it`.
// The answer streams the command's output as frames, then its exit code:
//   "s <session>\n" (first, stdin=stream only);  "o <n>\n" + n bytes of stdout
//   (with a tty: everything);  "e <n>\n" + n bytes of stderr;  "x <code>\n" (last)
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
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
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
  bool tty = false;  // stdin, stdout and stderr are one terminal: make it the controlling one
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

// Bytes of stdin a session holds for a command that has not read them yet.
constexpr size_t kMaxStdinWaiting = 1 << 20;

// One running command: its helper, the pipes (or terminal) to it, what is
// left to send. The answer's thread (Pump) owns the descriptors; stdin
// requests add to `stdin_left` and wake it.
struct Session {
  pid_t helper = -1;
  int in = -1, out = -1, err = -1, fail = -1;
  int tty = -1;   // the terminal's master (for resizes; in and out are dups), or -1
  int wake = -1;  // eventfd: stdin arrived
  bool reaped = false;
  std::mutex mu;
  std::string stdin_left;  // guarded by mu
  bool stdin_eof = true;   // guarded by mu: no more stdin will come
  ~Session() {
    if (!reaped && helper > 0) {
      kill(helper, SIGKILL);  // the client went away: the command goes too (PDEATHSIG)
      while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    for (int fd : {in, out, err, fail, tty, wake}) {
      if (fd >= 0) close(fd);
    }
  }
};

// Sessions whose stdin comes in later requests, by a public index; the
// secret part of a session's name is compared in constant time.
class StreamedSessions {
 public:
  // The session's name, "<index>.<32 hex digits>".
  std::string Add(int64_t job, const std::shared_ptr<Session>& s) {
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof raw) != 1) throw std::runtime_error("no random bytes for a session");
    static const char* hex = "0123456789abcdef";
    std::string secret;
    for (unsigned char c : raw) {
      secret += hex[c >> 4];
      secret += hex[c & 15];
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.session.expired() ? entries_.erase(it) : std::next(it);
    }
    uint64_t index = ++next_;
    entries_[index] = {job, secret, s};
    return std::to_string(index) + "." + secret;
  }
  // The live session of that name for that job, or null.
  std::shared_ptr<Session> Find(int64_t job, const std::string& name) {
    size_t dot = name.find('.');
    if (dot == std::string::npos || dot == 0 || dot > 19) return nullptr;
    uint64_t index = 0;
    for (size_t i = 0; i < dot; ++i) {
      if (name[i] < '0' || name[i] > '9') return nullptr;
      index = index * 10 + static_cast<uint64_t>(name[i] - '0');
    }
    std::string secret = name.substr(dot + 1);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(index);
    if (it == entries_.end() || it->second.job != job ||
        secret.size() != it->second.secret.size() ||
        CRYPTO_memcmp(secret.data(), it->second.secret.data(), secret.size()) != 0) {
      return nullptr;
    }
    return it->second.session.lock();
  }

 private:
  struct Entry {
    int64_t job = 0;
    std::string secret;
    std::weak_ptr<Session> session;
  };
  std::mutex mu_;
  uint64_t next_ = 0;                  // guarded by mu_
  std::map<uint64_t, Entry> entries_;  // guarded by mu_
};

StreamedSessions& Streamed() {
  static StreamedSessions sessions;
  return sessions;
}

// Writes what stdin holds; closes the command's stdin once it ends (all sent
// and no more coming, or the command stopped reading). A terminal stays open.
void PutStdin(Session& s, short revents) {
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.in < 0) return;
  if (!s.stdin_left.empty() && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    ssize_t put = write(s.in, s.stdin_left.data(), s.stdin_left.size());
    if (put > 0) s.stdin_left.erase(0, static_cast<size_t>(put));
    if (put < 0 && errno != EAGAIN && errno != EINTR && s.tty < 0) {
      s.stdin_left.clear();  // the command closed its stdin
      s.stdin_eof = true;
    }
  } else if (revents & (POLLERR | POLLHUP)) {
    s.stdin_eof = true;
  }
  if (s.stdin_left.empty() && s.stdin_eof && s.tty < 0) {
    close(s.in);  // EOF on its stdin
    s.in = -1;
  }
}

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
    bool to_send;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      to_send = !s.stdin_left.empty();
    }
    pollfd fds[4] = {{s.out, POLLIN, 0},
                     {s.err, POLLIN, 0},
                     {s.in, static_cast<short>(to_send ? POLLOUT : 0), 0},
                     {s.wake, POLLIN, 0}};
    int n = poll(fds, 4, 50);
    if (n < 0 && errno != EINTR) return false;
    if (fds[3].revents & POLLIN) {
      uint64_t ignored;
      ssize_t r = read(s.wake, &ignored, sizeof ignored);
      (void)r;
    }
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
    if (s.in >= 0) PutStdin(s, fds[2].revents);
  }
  return sink.is_writable();
}

}  // namespace

// rows and cols of a terminal, each 1-1000 when given; throws SpecError.
// False when neither is given.
bool TerminalSize(const httplib::Request& req, winsize* size) {
  int rows = IntParam(req, "rows");
  int cols = IntParam(req, "cols");
  for (auto [name, v] : {std::pair<const char*, int>{"rows", rows}, {"cols", cols}}) {
    if (v == 0 || v > 1000) {
      throw model::SpecError(
          name, std::string(name) + " must be between 1 and 1000 (got " + std::to_string(v) + ")");
    }
  }
  if (rows > 0) size->ws_row = static_cast<unsigned short>(rows);
  if (cols > 0) size->ws_col = static_cast<unsigned short>(cols);
  return rows > 0 || cols > 0;
}

// The command's stdin and stdout/stderr: three pipes, or one new terminal
// (its master in s, its other side in *child_end, the helper's).
bool MakeStreams(bool tty, const winsize& size, Session* s, int child_end[3], std::string* why) {
  if (tty) {
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    int other = -1;
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0 ||
        (other = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
      *why = std::string("terminal: ") + strerror(errno);
      if (master >= 0) close(master);
      return false;
    }
    ioctl(master, TIOCSWINSZ, &size);
    s->tty = master;  // the Session closes it, and in and out
    s->in = fcntl(master, F_DUPFD_CLOEXEC, 0);
    s->out = fcntl(master, F_DUPFD_CLOEXEC, 0);
    if (s->in < 0 || s->out < 0) {
      *why = std::string("terminal: ") + strerror(errno);
      close(other);
      return false;
    }
    child_end[0] = child_end[1] = child_end[2] = other;
    return true;
  }
  int pipes[3][2];
  for (int i = 0; i < 3; ++i) {
    if (pipe2(pipes[i], O_CLOEXEC) != 0) {
      *why = std::string("pipe: ") + strerror(errno);
      for (int j = 0; j < i; ++j) {
        close(pipes[j][0]);
        close(pipes[j][1]);
      }
      return false;
    }
  }
  s->in = pipes[0][1];
  s->out = pipes[1][0];
  s->err = pipes[2][0];
  child_end[0] = pipes[0][0];
  child_end[1] = pipes[1][1];
  child_end[2] = pipes[2][1];
  return true;
}

// Closes the helper's ends once each (a terminal's are one descriptor three
// times: closing it again could close another thread's new descriptor).
void CloseChildEnds(const int child[3]) {
  for (int i = 0; i < 3; ++i) {
    if (child[i] < 0) continue;
    if ((i > 0 && child[i] == child[0]) || (i > 1 && child[i] == child[1])) continue;
    close(child[i]);
  }
}

void HandleExecStdin(const Api& api, const httplib::Request& req, httplib::Response& res) {
  (void)api;
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  winsize size{0, 0, 0, 0};
  bool resize = false, eof = false;
  try {
    std::string e = req.get_param_value("eof");
    if (!e.empty() && e != "0" && e != "1") {
      throw model::SpecError("eof", "eof must be 0 or 1 (got '" + e + "')");
    }
    eof = e == "1";
    resize = TerminalSize(req, &size);
  } catch (const model::SpecError& e) {
    return net::ErrorResponse(res, 400, e.what());
  }
  auto s = Streamed().Find(id, req.get_header_value(kExecSessionHeader));
  if (!s) {
    return net::ErrorResponse(res, 404,
                              "no such exec session for job " + std::to_string(id) +
                                  " (it ended, or the " + kExecSessionHeader + " header is wrong)");
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    if (s->stdin_eof && (!req.body.empty() || eof) && s->tty < 0) {
      return net::ErrorResponse(res, 409, "the command's stdin is closed");
    }
    if (s->stdin_left.size() + req.body.size() > kMaxStdinWaiting) {
      res.set_header("Retry-After", "1");
      return net::ErrorResponse(res, 503,
                                "the command has not read the stdin sent before: send again later");
    }
    s->stdin_left += req.body;
    if (eof) s->stdin_eof = true;
    if (resize && s->tty >= 0) {
      winsize now{};
      ioctl(s->tty, TIOCGWINSZ, &now);
      if (size.ws_row == 0) size.ws_row = now.ws_row;
      if (size.ws_col == 0) size.ws_col = now.ws_col;
      ioctl(s->tty, TIOCSWINSZ, &size);
    }
  }
  uint64_t one = 1;
  ssize_t w = write(s->wake, &one, sizeof one);
  (void)w;
  res.set_content(R"({"ok":true})", "application/json");
}

void HandleExec(const Api& api, const httplib::Request& req, httplib::Response& res) {
  int64_t id;
  if (!ParseId(JobIdArg(req), &id)) {
    return net::ErrorResponse(res, 400, "job id must be a positive integer");
  }
  int attempt;
  auto plan = std::make_shared<ExecPlan>();
  bool streamed = false;
  winsize size{24, 80, 0, 0};
  try {
    attempt = IntParam(req, "attempt");
    std::string in = req.get_param_value("stdin");
    if (!in.empty() && in != "body" && in != "stream") {
      throw model::SpecError("stdin", "stdin must be body or stream (got '" + in + "')");
    }
    streamed = in == "stream";
    std::string tty = req.get_param_value("tty");
    if (!tty.empty() && tty != "0" && tty != "1") {
      throw model::SpecError("tty", "tty must be 0 or 1 (got '" + tty + "')");
    }
    plan->tty = tty == "1";
    TerminalSize(req, &size);
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

  auto s = std::make_shared<Session>();
  int child[3] = {-1, -1, -1};
  int fail[2];
  std::string why;
  if (!MakeStreams(plan->tty, size, s.get(), child, &why)) {
    return net::ErrorResponse(res, 500, why);
  }
  s->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake < 0 || pipe2(fail, O_CLOEXEC) != 0) {
    int e = errno;
    CloseChildEnds(child);
    return net::ErrorResponse(res, 500, std::string("pipe: ") + strerror(e));
  }
  pid_t helper = fork();
  if (helper == 0) {
    for (int fd : {s->in, s->out, s->err, s->tty, s->wake, fail[0]}) {
      if (fd >= 0) close(fd);
    }
    Helper(*plan, child[0], child[1], child[2], fail[1]);
  }
  int fork_errno = errno;
  CloseChildEnds(child);
  close(fail[1]);
  s->fail = fail[0];
  if (helper < 0) return net::ErrorResponse(res, 500, std::string("fork: ") + strerror(fork_errno));
  s->helper = helper;
  for (int fd : {s->in, s->out, s->err}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  s->stdin_left = req.body;
  s->stdin_eof = !streamed;
  std::string first;
  if (streamed) first = "s " + Streamed().Add(id, s) + "\n";
  PutStdin(*s, 0);  // nothing to send and no more coming: EOF on its stdin now
  api.metrics.Add("pgfleet_host_api_execs_total", 1);
  std::function<void()> touch = api.guard ? api.guard->Toucher(req) : [] {};
  res.set_chunked_content_provider("application/x-pgfleet-exec",
                                   [s, touch, first](size_t, httplib::DataSink& sink) mutable {
                                     touch();
                                     if (!first.empty()) {
                                       if (!sink.write(first.data(), first.size())) return false;
                                       first.clear();
                                     }
                                     return Pump(*s, sink);
                                   });
}

}  // namespace pgfleet::hostd::routes
