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

#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstring>
#include <memory>

#include "core/util/mutex.h"
#include "hostd/api/api_routes.h"
#include "hostd/drivers/container/container.h"
#include "hostd/exec/exec_helper.h"
#include "hostd/exec/exec_session.h"

namespace pgfleet::hostd::routes {
namespace {

using exec::ExecPlan;
using exec::kMaxStdinWaiting;
using exec::Session;
using exec::Streamed;

// rows and cols of a terminal, each 1-1000 when given; BadParam otherwise.
// False when neither is given.
bool TerminalSize(const httplib::Request& req, winsize* size) {
  int rows = IntParam(req, "rows");
  int cols = IntParam(req, "cols");
  for (auto [name, v] : {std::pair<const char*, int>{"rows", rows}, {"cols", cols}}) {
    if (v == 0 || v > 1000) {
      BadParam(name,
               std::string(name) + " must be between 1 and 1000 (got " + std::to_string(v) + ")");
    }
  }
  if (rows > 0) size->ws_row = static_cast<unsigned short>(rows);
  if (cols > 0) size->ws_col = static_cast<unsigned short>(cols);
  return rows > 0 || cols > 0;
}

// What POST .../exec asks for, read from its query: the command and how to run it.
struct ExecQuery {
  int attempt = -1;
  bool streamed = false;  // stdin=stream
  winsize size{24, 80, 0, 0};
};

ExecQuery ParseExecQuery(const httplib::Request& req, ExecPlan* plan) {
  ExecQuery q;
  q.attempt = IntParam(req, "attempt");
  std::string in = req.get_param_value("stdin");
  if (!in.empty() && in != "body" && in != "stream") {
    BadParam("stdin", "stdin must be body or stream (got '" + in.substr(0, 20) + "')");
  }
  q.streamed = in == "stream";
  std::string tty = req.get_param_value("tty");
  if (!tty.empty() && tty != "0" && tty != "1") {
    BadParam("tty", "tty must be 0 or 1 (got '" + tty.substr(0, 20) + "')");
  }
  plan->tty = tty == "1";
  TerminalSize(req, &q.size);
  size_t n = req.get_param_value_count("arg");
  if (n == 0) BadParam("arg", "arg: give the command as arg=CMD&arg=ARG...");
  if (n > 1024) BadParam("arg", "arg: at most 1024 arguments");
  for (size_t i = 0; i < n; ++i) {
    std::string a = req.get_param_value("arg", i);
    if (a.find('\0') != std::string::npos || (i == 0 && a.empty())) {
      BadParam("arg", "arg: the command must be non-empty, without NUL bytes");
    }
    plan->argv_store.push_back(a);
  }
  return q;
}

// Fills in what the command joins of the running job `id` (its identity,
// environment, working directory; a container job's namespaces, root and
// cgroup): RequestError 409 when the job is not running or has just ended.
void JoinRunningJob(const Api& api, int64_t id, int attempt, ExecPlan* plan) {
  auto info = api.supervisor.Attempt(id, attempt < 0 ? 0 : attempt);
  if (!info || info->pid <= 0 || !api.supervisor.Live(info->job_id, info->attempt)) {
    throw RequestError(409, "",
                       "job " + std::to_string(id) +
                           " is not running on this host: exec runs commands in "
                           "a running job only");
  }
  const bool own_root = api.supervisor.capabilities().has_own_root;
  if (!exec::PlanInJob(info->pid, own_root,
                       own_root
                           ? JobCgroupProcsFiles(api.agent.Config().id, info->job_id, info->attempt)
                           : std::vector<std::string>{},
                       plan)) {
    throw RequestError(409, "", "job " + std::to_string(id) + " has just ended");
  }
}

// Forks the helper that runs the plan (exec::RunHelper), with the session's
// streams; stdin is `body`, and more to come when `streamed`. Throws
// std::runtime_error when the streams or the fork cannot be made.
std::shared_ptr<Session> StartHelper(const ExecPlan& plan, const winsize& size,
                                     const std::string& body, bool streamed) {
  auto s = std::make_shared<Session>();
  int child[3] = {-1, -1, -1};
  int fail[2];
  std::string why;
  if (!exec::MakeStreams(plan.tty, size, s.get(), child, &why)) throw std::runtime_error(why);
  s->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake < 0 || pipe2(fail, O_CLOEXEC) != 0) {
    int e = errno;
    exec::CloseChildEnds(child);
    throw std::runtime_error(std::string("pipe: ") + strerror(e));
  }
  pid_t helper = fork();
  if (helper == 0) {
    for (int fd : {s->in, s->out, s->err, s->tty, s->wake, fail[0]}) {
      if (fd >= 0) close(fd);
    }
    exec::RunHelper(plan, child[0], child[1], child[2], fail[1]);
  }
  int fork_errno = errno;
  exec::CloseChildEnds(child);
  close(fail[1]);
  s->fail = fail[0];
  if (helper < 0) throw std::runtime_error(std::string("fork: ") + strerror(fork_errno));
  s->helper = helper;
  for (int fd : {s->in, s->out, s->err}) {
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  util::MutexLock lock(s->mu);  // not shared yet, but the fields are the lock's
  s->stdin_left = body;
  s->stdin_eof = !streamed;
  return s;
}

}  // namespace

void HandleExecStdin(const Api& api, const httplib::Request& req, httplib::Response& res) {
  (void)api;
  const int64_t id = JobIdOf(req);
  winsize size{0, 0, 0, 0};
  const bool eof = FlagParam(req, "eof");
  const bool resize = TerminalSize(req, &size);
  auto s = Streamed().Find(id, req.get_header_value(kExecSessionHeader));
  if (!s) {
    throw RequestError(404, kExecSessionHeader,
                       "no such exec session for job " + std::to_string(id) + " (it ended, or the " +
                           kExecSessionHeader + " header is wrong)");
  }
  {
    util::MutexLock lock(s->mu);
    if (s->stdin_eof && (!req.body.empty() || eof) && s->tty < 0) {
      throw RequestError(409, "", "the command's stdin is closed");
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
  const int64_t id = JobIdOf(req);
  auto plan = std::make_shared<ExecPlan>();
  ExecQuery q = ParseExecQuery(req, plan.get());
  AuthorizeJobRequest(api, req, net::TicketKind::kExec, id, &q.attempt);
  RefuseIfSimulated(api, "no command runs in job " + std::to_string(id));
  JoinRunningJob(api, id, q.attempt, plan.get());
  auto s = StartHelper(*plan, q.size, req.body, q.streamed);
  std::string first;
  if (q.streamed) first = "s " + Streamed().Add(id, s) + "\n";
  exec::PutStdin(*s, 0);  // nothing to send and no more coming: EOF on its stdin now
  api.metrics.Add("pgfleet_host_api_execs_total", 1);
  std::function<void()> touch = api.guard ? api.guard->Toucher(req) : [] {};
  res.set_chunked_content_provider("application/x-pgfleet-exec",
                                   [s, touch, first](size_t, httplib::DataSink& sink) mutable {
                                     touch();
                                     if (!first.empty()) {
                                       if (!sink.write(first.data(), first.size())) return false;
                                       first.clear();
                                     }
                                     return exec::Pump(*s, sink);
                                   });
}

}  // namespace pgfleet::hostd::routes
