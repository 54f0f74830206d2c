#include "hostd/attempt/collector.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/util/mutex.h"
#include "hostd/attempt/attempt_dir.h"
#include "hostd/attempt/outcome.h"

namespace pgfleet::hostd {
namespace {

using nlohmann::json;

constexpr const char* kCollectedFile = "collected.jsonl";

}  // namespace

Collector::Collector(CollectorOptions options, metrics::Registry& metrics)
    : options_(std::move(options)), metrics_(metrics) {
  metrics_.Describe("pgfleet_host_attempts_collected_total",
                    "Finished attempt directories removed (--gc-after, --gc-disk-percent)");
  metrics_.Describe("pgfleet_host_data_disk_percent",
                    "Percent of the data directory's filesystem in use");
  const std::string path = options_.data_dir + "/" + kCollectedFile;
  const int64_t forget_before = static_cast<int64_t>(std::time(nullptr)) -
                                std::chrono::duration_cast<std::chrono::seconds>(kRemember).count();
  std::ifstream in(path);
  std::string kept;
  bool dropped = false;
  for (std::string line; std::getline(in, line);) {
    try {
      json j = json::parse(line);
      Collected c{j.at("ended").get<int64_t>(), j.at("collected").get<int64_t>(),
                  j.value("uid", std::string())};
      if (c.collected < forget_before) {
        dropped = true;
        continue;
      }
      collected_[{j.at("job").get<int64_t>(), j.at("attempt").get<int>()}] = c;
      kept += line + "\n";
    } catch (const std::exception&) {
      dropped = true;  // a line cut short by a crash
    }
  }
  if (dropped) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::trunc) << kept;
    if (rename(tmp.c_str(), path.c_str()) != 0) unlink(tmp.c_str());
  }
}

int Collector::DiskPercent(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return -1;
  const double used = static_cast<double>(st.f_blocks - st.f_bfree);
  const double usable = used + static_cast<double>(st.f_bavail);
  if (usable <= 0) return -1;
  return static_cast<int>((used * 100 + usable - 1) / usable);  // rounded up, as df
}

int64_t Collector::FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

int Collector::RunOnce() {
  struct Finished {
    int64_t job = 0;
    int attempt = 0;
    int64_t ended = 0;
  };
  std::vector<Finished> finished;
  ForEachAttemptDir(options_.data_dir, [&](int64_t job, int attempt) {
    struct stat st {};
    const std::string reported =
        attempt::DirOf(options_.data_dir, job, attempt) + "/" + attempt::kReportedStateFile;
    // Only attempts whose outcome the database has; the outcome record's
    // last write is when the attempt ended.
    if (stat(reported.c_str(), &st) == 0) {
      finished.push_back({job, attempt, static_cast<int64_t>(st.st_mtime)});
    }
  });
  std::sort(finished.begin(), finished.end(),
            [](const Finished& a, const Finished& b) { return a.ended < b.ended; });
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  int n = 0;
  std::vector<bool> gone(finished.size(), false);
  for (size_t i = 0; i < finished.size(); ++i) {
    if (now - finished[i].ended < options_.gc_after.count()) break;  // the rest are younger
    gone[i] = Collect(finished[i].job, finished[i].attempt, finished[i].ended, now);
    n += gone[i];
  }
  int percent = DiskPercent(options_.data_dir);
  if (percent > options_.disk_percent) {
    int freed = 0;
    for (size_t i = 0; i < finished.size() && percent > options_.disk_percent; ++i) {
      if (gone[i] || !Collect(finished[i].job, finished[i].attempt, finished[i].ended, now)) {
        continue;
      }
      ++freed;
      percent = DiskPercent(options_.data_dir);
    }
    n += freed;
    if (freed > 0) {
      spdlog::warn("data dir {} over {}% full: collected {} finished attempt(s) early, now {}%",
                   options_.data_dir, options_.disk_percent, freed, percent);
    }
  }
  metrics_.Set("pgfleet_host_data_disk_percent", percent);
  if (n > 0) metrics_.Add("pgfleet_host_attempts_collected_total", n);
  return n;
}

bool Collector::Collect(int64_t job, int attempt, int64_t ended, int64_t now) {
  {
    util::MutexLock lock(mu_);
    if (held_.count({job, attempt})) return false;  // its log is being read
    // Remembered (and written down) before the directory goes: from here on
    // a dispatch of it is refused and its log reported collected.
    const std::string uid = attempt::ReadUid(attempt::DirOf(options_.data_dir, job, attempt));
    json line{{"job", job}, {"attempt", attempt}, {"ended", ended}, {"collected", now}};
    if (!uid.empty()) line["uid"] = uid;
    std::string text = line.dump() + "\n";
    int fd = open((options_.data_dir + "/" + kCollectedFile).c_str(),
                  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    bool written =
        fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (fd >= 0) close(fd);
    if (!written) {
      spdlog::warn("job={} attempt={} not collected: cannot record it in {}", job, attempt,
                   kCollectedFile);
      return false;
    }
    collected_[{job, attempt}] = {ended, now, uid};
  }
  std::error_code ec;
  std::filesystem::remove_all(attempt::DirOf(options_.data_dir, job, attempt), ec);
  if (ec) spdlog::warn("job={} attempt={} collecting: {}", job, attempt, ec.message());
  return true;
}

std::optional<Collector::Collected> Collector::Find(int64_t job, int* attempt) const {
  util::MutexLock lock(mu_);
  if (*attempt > 0) {
    auto it = collected_.find({job, *attempt});
    if (it == collected_.end()) return std::nullopt;
    return it->second;
  }
  auto it = collected_.upper_bound({job, INT32_MAX});
  if (it == collected_.begin()) return std::nullopt;
  --it;
  if (it->first.first != job) return std::nullopt;
  *attempt = it->first.second;
  return it->second;
}

std::shared_ptr<void> Collector::Hold(int64_t job, int attempt) {
  util::MutexLock lock(mu_);
  ++held_[{job, attempt}];
  return std::shared_ptr<void>(nullptr, [this, job, attempt](void*) {
    util::MutexLock lock(mu_);
    if (--held_[{job, attempt}] == 0) held_.erase({job, attempt});
  });
}

}  // namespace pgfleet::hostd
