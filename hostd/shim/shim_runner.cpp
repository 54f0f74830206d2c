#include "hostd/shim/shim_runner.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/util/text.h"
#include "hostd/output/output_log.h"
#include "hostd/attempt/outcome.h"

namespace pgfleet::hostd {

ShimRunner::ShimRunner(const ShimClientOptions& options)
    : data_dir_(options.data_dir),
      container_host_(CapabilitiesOfDriver(options.driver).has_cgroup ? options.host_id : ""),
      shims_(options) {
  mkdir(attempt::JobsDir(data_dir_).c_str(), 0755);
}

namespace {
// A uid as part of a file name: hex digits and dashes only (it was read from
// a file anyone with access to the data directory could have written).
std::string FileNamePart(const std::string& uid) {
  std::string out;
  for (char c : uid) {
    if (std::isxdigit(static_cast<unsigned char>(c)) || c == '-') out += c;
  }
  return out.empty() ? "unknown" : out.substr(0, 64);
}
}  // namespace

AttemptRunner::Claim ShimRunner::ClaimAttempt(int64_t job_id, int attempt, const std::string& uid,
                                              std::string* error) {
  const std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  if (mkdir(dir.c_str(), 0700) != 0) {
    if (errno != EEXIST) {
      *error = "cannot create " + dir + ": " + std::strerror(errno);
      return Claim::kFailed;
    }
    const std::string had = attempt::ReadUid(dir);
    if (!attempt::OtherJob(had, uid)) return Claim::kTaken;
    // Another job's attempt of the same id and number: this host ran it for
    // another database, or for this one before it was restored from a backup.
    const std::string stale = data_dir_ + "/" + attempt::kStaleDir;
    mkdir(stale.c_str(), 0755);
    const std::string aside = stale + "/" + std::to_string(job_id) + "-" + std::to_string(attempt) +
                              "-" + FileNamePart(had);
    if (rename(dir.c_str(), aside.c_str()) != 0 || mkdir(dir.c_str(), 0700) != 0) {
      *error = "cannot set aside " + dir + " (job uid " + had + ", now " + uid +
               "): " + std::strerror(errno);
      return Claim::kFailed;
    }
    spdlog::warn(
        "job={} attempt={}: {} was left by another job of that id (uid {}; this one is {}): "
        "another or a restored database; moved to {}",
        job_id, attempt, dir, had, uid, aside);
  }
  if (!uid.empty()) {
    const std::string path = dir + "/" + attempt::kUidFile;
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    bool ok = fd >= 0 && write(fd, uid.data(), uid.size()) == static_cast<ssize_t>(uid.size());
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (!ok) {
      // Claimed all the same: without the file, a later claim by another
      // uid would be refused as taken (the old behaviour), never run twice.
      spdlog::warn("job={} attempt={} cannot write {}: {}", job_id, attempt, path,
                   std::strerror(errno));
    }
  }
  return Claim::kClaimed;
}

void ShimRunner::RecordStartFailed(int64_t job_id, int attempt, const std::string& error) {
  // Recorded for a restarted hostd too (a first outcome the shim wrote wins).
  attempt::Outcome o;
  o.kind = model::ExitOutcome::kStartFailed;
  o.status.error = error;
  std::string ignored;
  attempt::AppendRecord(attempt::DirOf(data_dir_, job_id, attempt), attempt::ToJson(o), &ignored);
}

bool ShimRunner::Start(const attempt::ShimRequest& req, Started* out, std::string* error) {
  std::string dir = attempt::DirOf(data_dir_, req.job_id, req.attempt);
  ShimClient::Started started;
  if (!shims_.Start(dir, req, &started, error)) return false;
  out->shim = started.shim;
  out->job_pid = started.job_pid;
  out->address = started.address;
  return true;
}

void ShimRunner::Await(int64_t job_id, int attempt, Ended ended) {
  std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  std::thread([job_id, attempt, dir, host = container_host_, ended = std::move(ended)] {
    attempt::WaitShimGone(dir);
    ended(FinalOutcome(job_id, attempt, dir, host));
  }).detach();
}

void ShimRunner::Signal(int64_t, int, const Started& started, int shim_signal) {
  ShimClient::Signal(started.shim, shim_signal);
}

std::string ShimRunner::OutputTail(int64_t job_id, int attempt) const {
  const std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  std::string tail = output::Tail(dir, kOutputTailBytes);
  return util::TailText(tail, output::ExtentOf(dir).end > tail.size());
}

void ShimRunner::MarkReported(int64_t job_id, int attempt, const std::string& uid) {
  const std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  // Set aside since, when another job's attempt is here now.
  if (!uid.empty() && attempt::OtherJob(attempt::ReadUid(dir), uid)) return;
  std::string error;
  if (!MarkSettled(dir, &error)) {
    spdlog::warn("job={} attempt={} cannot mark reported: {}", job_id, attempt, error);
  }
}

std::string ShimRunner::LogPath(int64_t job_id, int attempt) const {
  // Latest attempt on disk: also after a hostd restart, logs outlive the job.
  if (attempt <= 0) attempt = LatestAttemptOnDisk(data_dir_, job_id);
  if (attempt <= 0) return "";
  std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  return output::Exists(dir) ? dir + "/" + attempt::kOutputFile : "";
}

}  // namespace pgfleet::hostd
