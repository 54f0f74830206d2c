#include "hostd/shim/shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/model/json_limits.h"
#include "core/util/log.h"
#include "core/util/mutex.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/drivers/driver.h"
#include "hostd/drivers/driver_factory.h"
#include "hostd/fence/lease.h"
#include "hostd/output/log_forward.h"
#include "hostd/output/output_log.h"

namespace pgfleet::hostd {
namespace {

using nlohmann::json;

int g_start_pipe = -1;  // closed once hostd has been told how the start went
util::Mutex g_fence_mu;
std::string g_fence_reason GUARDED_BY(g_fence_mu);  // set when this shim fenced the job itself

void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (fd >= 0 && done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // hostd is gone: a restarted one reads state.jsonl instead
    done += static_cast<size_t>(n);
  }
}

void TellHostd(const std::string& message) {
  WriteAll(g_start_pipe, message);
  if (g_start_pipe >= 0) close(g_start_pipe);
  g_start_pipe = -1;
}

// The job could not be started: record it (first, so a hostd that restarts
// in between still finds the reason), tell hostd, and end.
[[noreturn]] void FailStart(const std::string& dir, const std::string& ids,
                            const std::string& message) {
  attempt::Outcome o;
  o.kind = model::ExitOutcome::kStartFailed;
  o.status.error = message;
  std::string err;
  if (!attempt::AppendRecord(dir, attempt::ToJson(o), &err)) spdlog::error("{} {}", ids, err);
  spdlog::warn("{} start failed: {}", ids, message);
  TellHostd("fail " + message);
  _exit(0);
}

// Reads the whole request from fd (a memfd from hostd, or stdin).
std::string ReadAll(int fd) {
  std::string out;
  lseek(fd, 0, SEEK_SET);  // fails harmlessly on a pipe
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

// Puts /dev/null on stdin and the host's shim log on stdout and stderr,
// whatever descriptors hostd left there.
void RedirectStdio(const std::string& data_dir) {
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  int log_fd = open((data_dir + "/" + attempt::kShimLogFile).c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) log_fd = null_fd;
  if (null_fd >= 0) dup2(null_fd, 0);
  if (log_fd >= 0) {
    dup2(log_fd, 1);
    dup2(log_fd, 2);
  }
  if (null_fd > 2) close(null_fd);
  if (log_fd > 2 && log_fd != null_fd) close(log_fd);
}

}  // namespace

void RunShimCommand(int argc, char** argv) {
  if (argc != 3 || argv[2][0] != '/') {
    std::fprintf(stderr,
                 "usage: pgfleet-hostd shim /ABSOLUTE/ATTEMPT/DIR < REQUEST.json\n"
                 "(internal: hostd runs one per job; see hostd/attempt/attempt_dir.h)\n");
    _exit(2);
  }
  dup2(0, attempt::kRequestFd);
  close(attempt::kStartPipeFd);  // nobody to tell
  close(attempt::kLockFd);       // RunShim locks the directory itself
  util::SetupLogging("shim", "info");
  RunShim(argv[2], nullptr);
}

namespace {

// Blocks the stop signals (they wait, not lost, until the job exists and
// ForwardStops takes them), ignores what a terminal or hostd's exit sends.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, attempt::kStopSignal);
  sigaddset(&stop_signals, attempt::kKillSignal);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  for (int s : {SIGINT, SIGHUP, SIGQUIT, SIGPIPE}) signal(s, SIG_IGN);
  return stop_signals;
}

// Our life is the lock's life. hostd locked the directory for us (same open
// file description, so this succeeds); without it, lock it here or give up.
// Returns the locked descriptor.
int LockAttemptDir(const std::string& dir, bool inherited_lock) {
  int lock_fd = inherited_lock ? attempt::kLockFd : attempt::OpenLock(dir);
  if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    // Another shim owns this attempt (or the dir is unusable): change nothing.
    std::string why = std::strerror(errno);
    std::fprintf(stderr, "pgfleet-hostd shim: %s: cannot lock the attempt directory: %s\n",
                 dir.c_str(), why.c_str());
    TellHostd("fail cannot lock the attempt directory: " + why);
    _exit(1);
  }
  return lock_fd;
}

// The job's stdout and stderr: a pipe whose read end a thread copies into
// the attempt's rotated output files (output_log.h) until every writer has
// closed it. A job that writes faster than the disk blocks on the full pipe
// (nothing is lost); output the disk refuses (full) is dropped and counted.
struct OutputPipe {
  int write_fd = -1;
  std::shared_future<void> copied;           // ready once the copy saw end of file
  std::shared_ptr<LineForwarder> forwarder;  // null unless --log-forward
};

// The attempt's forwarder (log_forward.h), or null when hostd forwards
// nothing or its target is unusable (logged; the output files are kept
// either way).
std::shared_ptr<LineForwarder> MakeForwarder(const attempt::ShimRequest& req,
                                             const std::string& ids) {
  if (req.log_forward.empty()) return nullptr;
  try {
    return std::make_shared<LineForwarder>(
        ParseLogForward(req.log_forward),
        LineOrigin{req.job_id, req.attempt, req.spec.formation, req.host_id});
  } catch (const std::exception& e) {
    spdlog::warn("{} output not forwarded: {}", ids, e.what());
    return nullptr;
  }
}

OutputPipe StartOutputCopy(const std::string& dir, const attempt::ShimRequest& req,
                           const std::string& ids) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) FailStart(dir, ids, std::string("pipe: ") + std::strerror(errno));
  fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);  // fewer stalls for a bursty job (best effort)
  auto done = std::make_shared<std::promise<void>>();
  OutputPipe out{fds[1], done->get_future().share(), nullptr};
  // Everything the thread needs is allocated here: until the job writes, it
  // only waits in read(), so the driver may clone() meanwhile (the container
  // driver's child runs code before exec) without a lock held by another thread.
  auto writer = std::make_shared<output::Writer>(dir, req.log_max_files,
                                                 static_cast<uint64_t>(req.log_max_file_mb) << 20);
  auto buf = std::make_shared<std::vector<char>>(1 << 16);
  out.forwarder = MakeForwarder(req, ids);
  std::thread([read_fd = fds[0], ids, writer, buf, done, forwarder = out.forwarder] {
    while (true) {
      ssize_t n = read(read_fd, buf->data(), buf->size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      writer->Write(buf->data(), static_cast<size_t>(n));
      if (forwarder) forwarder->Feed(buf->data(), static_cast<size_t>(n));
    }
    if (writer->dropped() > 0) {
      spdlog::warn("{} {} bytes of output could not be written (disk full?)", ids,
                   writer->dropped());
    }
    done->set_value();
  }).detach();
  return out;
}

// Starts the job through the driver, records "started" and tells hostd.
// Ends the process (FailStart) when the job cannot start.
std::unique_ptr<Execution> StartJob(const std::string& dir, const attempt::ShimRequest& req,
                                    Driver* prepared, const std::string& ids, int output_fd) {
  // The driver lives as long as the process and is never destroyed: its
  // destructor tidies state shared by every job of the host (the per-host
  // cgroup), which is hostd's business, not one job's.
  Driver* driver = prepared && prepared->name() == req.driver ? prepared : nullptr;
  std::unique_ptr<Execution> exec;
  try {
    if (!driver) driver = MakeDriver(req.driver, {req.data_dir, req.host_id, req.job_ids}).release();
    RunRequest run;
    run.job_id = req.job_id;
    run.attempt = req.attempt;
    run.spec = req.spec;
    run.attempt_dir = dir;
    run.job_dir = dir + "/" + attempt::kWorkDir;
    // Root's, like the attempt dir; the container driver gives it to the job's user.
    if (mkdir(run.job_dir.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot make " + run.job_dir + ": " + std::strerror(errno));
    }
    run.log_path = dir + "/" + attempt::kOutputFile;
    run.output_fd = output_fd;
    run.host_id = req.host_id;
    run.host_address = req.host_address;
    run.network = req.network;
    exec = driver->Start(run);
  } catch (const std::exception& e) {
    FailStart(dir, ids, e.what());
  }
  close(output_fd);  // the job holds it now: the copy ends when the job's side closes
  const pid_t pid = exec->pid();
  attempt::JobRecord record;
  record.job = {pid, attempt::ProcStartTime(pid)};  // our unreaped child: the pid is stable
  record.shim = {getpid(), attempt::ProcStartTime(getpid())};
  record.stop_grace_seconds = req.spec.stop_grace_seconds;
  record.address = exec->address();
  // hostd first: it learns the pid (and the job's address) from the pipe, and
  // its running report need not wait for a file to be made. The record is for
  // a hostd that restarts (it waits for it while this shim lives,
  // Supervisor::Watch).
  TellHostd("ok " + std::to_string(pid) + (record.address.empty() ? "" : " " + record.address));
  std::string err;
  if (!attempt::AppendRecord(dir, attempt::ToJson(record), &err)) {
    spdlog::error("{} {}", ids, err);  // hostd learned the pid from the pipe; a restart would not
  }
  spdlog::debug("{} started pid={} driver={} shim={}", ids, pid, driver->name(), getpid());
  return exec;
}

// How long after the job's exit its output may still be arriving (a
// process it left behind can hold the pipe open forever).
constexpr auto kOutputDrain = std::chrono::seconds(2);
// How long after that the forwarder may take to send what it holds.
constexpr auto kForwardDrain = std::chrono::seconds(2);

// Waits for the job on its own thread and for its output to be on disk;
// records the outcome, unlocks, and ends the process.
void RecordExitWhenDone(Execution* running, const std::string& dir, const std::string& ids,
                        int lock_fd, const OutputPipe& output) {
  std::thread([running, dir, ids, lock_fd, output_copied = output.copied,
               forwarder = output.forwarder] {
    ExitStatus st = running->Wait();
    if (output_copied.wait_for(kOutputDrain) != std::future_status::ready) {
      spdlog::warn(
          "{} output still open {} s after the job's exit (a process it left?): "
          "the rest is not kept",
          ids, kOutputDrain.count());
    }
    if (forwarder) {
      forwarder->Finish(kForwardDrain);
      if (forwarder->dropped() > 0) {
        spdlog::warn("{} {} lines of output were not forwarded ({} were)", ids,
                     forwarder->dropped(), forwarder->sent());
      }
    }
    attempt::Outcome o;
    o.kind = model::ExitOutcome::kExited;
    o.status = st;
    {
      // Fenced by this shim: the attempt was lost with its host, whatever its
      // exit status; the job did nothing wrong, so it must not spend one of
      // its attempts (the host-loss rule applies).
      util::MutexLock lock(g_fence_mu);
      if (!g_fence_reason.empty()) {
        o.kind = model::ExitOutcome::kLost;
        o.status.error = g_fence_reason;
      }
    }
    std::string werr;
    if (!attempt::AppendRecord(dir, attempt::ToJson(o), &werr)) {
      spdlog::error("{} cannot record the exit: {}", ids, werr);
    }
    spdlog::debug("{} exited code={} signal={} oom={}", ids, st.exit_code, st.signal,
                  st.oom_killed);
    // Outcome recorded, job reaped: hostd may act now rather than after this
    // process has been torn down.
    close(lock_fd);
    _exit(0);
  }).detach();
}

// Fences the job when the host's lease has run out; returns how long until
// it would, or nullopt once fenced (no more lease to watch).
std::optional<std::chrono::milliseconds> CheckLease(Execution* running,
                                                    const attempt::ShimRequest& req,
                                                    const std::string& ids) {
  const auto fence_after = std::chrono::milliseconds(req.fence_after_ms);
  auto lease = ReadLease(req.data_dir);
  if (!lease) return std::chrono::milliseconds(1000);
  auto silent = std::chrono::nanoseconds(BootTimeNs() - *lease);
  if (silent < fence_after) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(fence_after - silent) +
           std::chrono::milliseconds(1);
  }
  std::string reason = fmt::format(
      "shim self-fenced: no successful heartbeat of the host for {:.1f} s (hostd down or "
      "cut off from the database)",
      std::chrono::duration<double>(silent).count());
  {
    util::MutexLock lock(g_fence_mu);
    g_fence_reason = reason;
  }
  spdlog::warn("{} {}: SIGKILL to the whole job", ids, reason);
  running->Signal(SIGKILL);
  return std::nullopt;
}

// Forwards stop requests to the job, forever; meanwhile watches the host's
// lease (lease.h), so the job is fenced even when hostd is down, hung or
// restarting.
[[noreturn]] void ForwardStops(Execution* running, const attempt::ShimRequest& req,
                               const std::string& ids, const sigset_t& stop_signals) {
  bool watch_lease = req.fence_after_ms > 0;
  while (true) {
    auto wait = std::chrono::milliseconds(1000);
    if (watch_lease) {
      auto left = CheckLease(running, req, ids);
      watch_lease = left.has_value();
      if (left) wait = std::min(wait, *left);
    }
    timespec timeout{static_cast<time_t>(wait.count() / 1000),
                     static_cast<long>(wait.count() % 1000) * 1000000};
    siginfo_t info;
    // Without a lease to watch, sleep until a signal comes (no periodic wake-ups).
    int sig = watch_lease ? sigtimedwait(&stop_signals, &info, &timeout)
                          : sigwaitinfo(&stop_signals, &info);
    if (sig < 0) continue;  // timeout or EINTR
    if (sig == attempt::kStopSignal) {
      spdlog::info("{} stop requested: SIGTERM to the job", ids);
      running->Signal(SIGTERM);
    } else if (sig == attempt::kKillSignal) {
      spdlog::info("{} kill requested: SIGKILL to the whole job", ids);
      running->Signal(SIGKILL);
    }
  }
}

}  // namespace

void RunShim(const std::string& dir, Driver* prepared) {
  // The job gets a clean mask and default dispositions from the driver.
  const sigset_t stop_signals = BlockStopSignals();
  setsid();  // hostd spawns us as a session leader already; this covers a manual start

  // Keep the start pipe and the lock, drop every other descriptor of hostd's
  // or the launcher's (hostd's listening socket above all: a restarted hostd
  // must be able to bind).
  if (fcntl(attempt::kStartPipeFd, F_SETFD, FD_CLOEXEC) == 0) g_start_pipe = attempt::kStartPipeFd;
  bool inherited_lock = fcntl(attempt::kLockFd, F_SETFD, FD_CLOEXEC) == 0;
  std::string request_text = ReadAll(attempt::kRequestFd);
  close_range(attempt::kLockFd + 1, UINT_MAX, 0);
  // Hold no directory busy (the job gets its own working directory from the driver).
  if (chdir("/") != 0)
    std::fprintf(stderr, "pgfleet-hostd shim: chdir /: %s\n", std::strerror(errno));
  std::string ids = "attempt-dir=" + dir.substr(dir.rfind('/') + 1);
  int lock_fd = LockAttemptDir(dir, inherited_lock);

  attempt::ShimRequest req;
  std::string request_error;
  try {
    req = attempt::ShimRequestFromJson(model::ParseBoundedJson(request_text, "shim request"));
  } catch (const std::exception& e) {
    request_error = std::string("invalid shim request: ") + e.what();
  }
  RedirectStdio(request_error.empty() ? req.data_dir : dir);  // the log goes to stderr
  if (!request_error.empty()) FailStart(dir, ids, request_error);
  ids = "job=" + std::to_string(req.job_id) + " attempt=" + std::to_string(req.attempt);

  OutputPipe output = StartOutputCopy(dir, req, ids);
  Execution* running = StartJob(dir, req, prepared, ids, output.write_fd).release();
  RecordExitWhenDone(running, dir, ids, lock_fd, output);
  ForwardStops(running, req, ids, stop_signals);
}

}  // namespace pgfleet::hostd
