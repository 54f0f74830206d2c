#include "hostd/shim_runner.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/util/text.h"
#include "hostd/output_log.h"
#include "hostd/recovery.h"
#include "hostd/supervisor.h"

namespace pgfleet::hostd {

ShimRunner::ShimRunner(const ShimClientOptions& options)
    : data_dir_(options.data_dir), shims_(options) {
  mkdir(attempt::JobsDir(data_dir_).c_str(), 0755);
}

AttemptRunner::Claim ShimRunner::ClaimAttempt(int64_t job_id, int attempt, std::string* error) {
  std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  if (mkdir(dir.c_str(), 0755) == 0) return Claim::kClaimed;
  if (errno == EEXIST) return Claim::kTaken;
  *error = "cannot create " + dir + ": " + std::strerror(errno);
  return Claim::kFailed;
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
  // The job may write in its directory whatever user it runs as.
  chmod(dir.c_str(), 0777);
  ShimClient::Started started;
  if (!shims_.Start(dir, req, &started, error)) return false;
  out->shim = started.shim;
  out->job_pid = started.job_pid;
  return true;
}

void ShimRunner::Await(int64_t job_id, int attempt, Ended ended) {
  std::string dir = attempt::DirOf(data_dir_, job_id, attempt);
  std::thread([job_id, attempt, dir, ended = std::move(ended)] {
    attempt::WaitShimGone(dir);
    ended(FinalOutcome(job_id, attempt, dir));
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

void ShimRunner::MarkReported(int64_t job_id, int attempt) {
  std::string error;
  if (!MarkSettled(attempt::DirOf(data_dir_, job_id, attempt), &error)) {
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
