#include "hostd/attempt/attempt_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/model/json_limits.h"
#include "core/util/text.h"

namespace pgfleet::hostd::attempt {

using nlohmann::json;

namespace {

// The kind of the "started" record (the others are model::ExitOutcome names).
constexpr const char* kStartedRecord = "started";

// Raw system calls: glibc 2.36's <sys/pidfd.h> lacks C++ linkage.
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int PidfdSendSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

}  // namespace

std::string JobsDir(const std::string& data_dir) { return data_dir + "/jobs"; }

std::string DirOf(const std::string& data_dir, int64_t job_id, int attempt) {
  return JobsDir(data_dir) + "/" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

std::string ReadUid(const std::string& dir) {
  int fd = open((dir + "/" + kUidFile).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  char buf[80] = {};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n > 0 ? util::Trim(std::string(buf, static_cast<size_t>(n))) : "";
}

bool WriteHealthCheck(const std::string& dir, const model::HealthCheck& check) {
  const std::string text = model::ToJson(check).dump();
  int fd = open((dir + "/" + kHealthCheckFile).c_str(),
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0 && close(fd) != 0) ok = false;
  return ok;
}

std::optional<model::HealthCheck> ReadHealthCheck(const std::string& dir) {
  int fd = open((dir + "/" + kHealthCheckFile).c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  std::string text(32 * 1024, '\0');
  ssize_t n = read(fd, text.data(), text.size());
  close(fd);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  try {
    return model::ParseHealthCheck(model::ParseBoundedJson(text, kHealthCheckFile));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

json ToJson(const ShimRequest& r) {
  return json{{"job", r.job_id},
              {"attempt", r.attempt},
              {"host_id", r.host_id},
              {"data_dir", r.data_dir},
              {"driver", r.driver},
              {"spec", model::ToJson(r.spec)},
              {"fence_after_ms", r.fence_after_ms},
              {"log_max_files", r.log_max_files},
              {"log_max_file_mb", r.log_max_file_mb},
              {"log_forward", r.log_forward},
              {"job_ids", FormatJobIdRange(r.job_ids)},
              {"host_address", r.host_address},
              {"network", r.network ? network::ToJson(*r.network) : json(nullptr)}};
}

ShimRequest ShimRequestFromJson(const json& j) {
  ShimRequest r;
  r.job_id = j.at("job").get<int64_t>();
  r.attempt = j.at("attempt").get<int>();
  r.host_id = j.at("host_id").get<std::string>();
  r.data_dir = j.at("data_dir").get<std::string>();
  r.driver = j.at("driver").get<std::string>();
  r.spec = model::ParseJobSpec(j.at("spec"));
  r.fence_after_ms = j.value("fence_after_ms", static_cast<int64_t>(0));
  r.log_max_files = j.value("log_max_files", r.log_max_files);
  r.log_max_file_mb = j.value("log_max_file_mb", r.log_max_file_mb);
  r.log_forward = j.value("log_forward", r.log_forward);
  if (j.contains("job_ids")) r.job_ids = ParseJobIdRange(j.at("job_ids").get<std::string>());
  r.host_address = j.value("host_address", std::string());
  if (j.contains("network") && !j["network"].is_null()) {
    r.network = network::NetworkOptionsFromJson(j["network"]);
  }
  return r;
}

int64_t ProcStartTime(pid_t pid) {
  if (pid <= 0) return -1;
  std::string stat = util::ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so
  // count fields from the last ')'. Field 3 (state) follows it; start time is 22.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  const char* p = stat.c_str() + close + 1;
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
    if (!*p) return -1;
  }
  while (*p == ' ') ++p;
  char* end = nullptr;
  long long v = std::strtoll(p, &end, 10);
  return end == p ? -1 : v;
}

bool SignalProcess(const ProcessId& id, int sig) {
  if (id.pid <= 0 || id.start_time < 0) return false;
  int pidfd = PidfdOpen(id.pid);
  if (pidfd < 0) return false;
  // The pidfd pins the process: if the start time matches now, the signal
  // below reaches this very process even if it exits and its pid is reused.
  bool same = ProcStartTime(id.pid) == id.start_time;
  bool sent = same && PidfdSendSignal(pidfd, sig) == 0;
  close(pidfd);
  return sent;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string FormatProcessId(const ProcessId& id) {
  return std::to_string(id.pid) + " " + std::to_string(id.start_time) + "\n";
}

json ToJson(const JobRecord& r) {
  return json{{"kind", kStartedRecord},
              {"pid", r.job.pid},
              {"pid_start", r.job.start_time},
              {"shim_pid", r.shim.pid},
              {"shim_start", r.shim.start_time},
              {"stop_grace_seconds", r.stop_grace_seconds},
              {"address", r.address}};
}

json ToJson(const Outcome& o) {
  const ExitStatus& s = o.status;
  return json{{"kind", std::string(model::ToString(o.kind))},
              {"exit_code", s.exit_code},
              {"signal", s.signal},
              {"oom_killed", s.oom_killed},
              {"peak_memory_bytes", s.peak_memory_bytes},
              {"cpu_seconds", s.cpu_seconds},
              {"error", s.error}};
}

bool AppendRecord(const std::string& dir, const json& record, std::string* error) {
  std::string path = dir + "/" + kStateFile;
  std::string line = record.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  ssize_t n;
  do {
    n = write(fd, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(line.size())) {
    *error = "cannot append to " + path + ": " + (n < 0 ? std::strerror(err) : "short write");
    return false;
  }
  return true;
}

State ReadState(const std::string& dir) {
  State st;
  std::string text = util::ReadFileOrEmpty(dir + "/" + kStateFile);
  if (text.empty()) text = util::ReadFileOrEmpty(dir + "/" + kReportedStateFile);
  size_t pos = 0;
  while (true) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;  // no newline: a write cut short, ignore
    json j = json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos),
                         text.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
    pos = end + 1;
    if (j.is_discarded() || !j.is_object()) continue;
    try {
      std::string kind = j.value("kind", std::string());
      std::optional<model::ExitOutcome> outcome = model::ParseExitOutcome(kind);
      if (kind == kStartedRecord && !st.started) {
        JobRecord r;
        r.job.pid = j.value("pid", 0);
        r.job.start_time = j.value("pid_start", static_cast<int64_t>(-1));
        r.shim.pid = j.value("shim_pid", 0);
        r.shim.start_time = j.value("shim_start", static_cast<int64_t>(-1));
        r.stop_grace_seconds = j.value("stop_grace_seconds", model::kDefaultStopGraceSeconds);
        r.address = j.value("address", std::string());
        if (r.job.pid > 0) st.started = r;
      } else if (outcome && !st.outcome) {
        Outcome o;
        o.kind = *outcome;
        o.status.exit_code = j.value("exit_code", -1);
        o.status.signal = j.value("signal", 0);
        o.status.oom_killed = j.value("oom_killed", false);
        o.status.peak_memory_bytes = j.value("peak_memory_bytes", static_cast<int64_t>(0));
        o.status.cpu_seconds = j.value("cpu_seconds", 0.0);
        o.status.error = j.value("error", std::string());
        st.outcome = o;
      }
    } catch (const std::exception&) {
      // A record of the wrong shape: not ours, skip it.
    }
  }
  return st;
}

int OpenLock(const std::string& dir) {
  return open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

bool ShimAlive(const std::string& dir) {
  int fd = OpenLock(dir);
  if (fd < 0) return false;
  int r;
  do {
    r = flock(fd, LOCK_SH | LOCK_NB);
  } while (r != 0 && errno == EINTR);
  close(fd);  // also drops our shared lock
  return r != 0;
}

bool WaitShimGone(const std::string& dir) {
  int fd = OpenLock(dir);
  if (fd < 0) return false;
  int r;
  do {
    r = flock(fd, LOCK_SH);
  } while (r != 0 && errno == EINTR);
  close(fd);
  return true;
}

}  // namespace pgfleet::hostd::attempt
