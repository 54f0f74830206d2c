#pragma once
// Collecting finished attempts' directories (<data_dir>/jobs/<job>-<attempt>,
// attempt_dir.h), so a host that runs thousands of jobs a day does not fill
// its disk. An attempt is collected once its outcome reached the database
// (state.reported.jsonl: the database keeps its events and output_tail):
//   - gc_after after it ended (the outcome record's time), or
//   - sooner, oldest first, while the data directory's filesystem is fuller
//     than disk_percent;
// never while its log is being streamed (Hold).
//
// The directory is hostd's at-most-once claim (a directory that exists is
// never started again), so a collected attempt leaves a line in
// <data_dir>/collected.jsonl ({"job","attempt","ended","collected"}, epoch
// seconds), written before the directory goes: a late dispatch of it is not
// started (Collected), and `pgfleet logs` of it says when its log went.
// Lines older than kRemember are dropped when hostd starts.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/metrics/metrics.h"
#include "core/util/mutex.h"

namespace pgfleet::hostd {

struct CollectorOptions {
  std::string data_dir;
  std::chrono::seconds gc_after{24 * 3600};  // --gc-after
  int disk_percent = 80;                     // --gc-disk-percent
};

class Collector {
 public:
  // Long past any dispatch that could still arrive late: what is older is
  // forgotten at start.
  static constexpr std::chrono::hours kRemember{24 * 7};

  struct Collected {
    int64_t ended = 0;      // epoch seconds
    int64_t collected = 0;  // epoch seconds
    std::string uid;        // the job's uid, "" when unknown
  };

  // Reads collected.jsonl. metrics must outlive the collector.
  Collector(CollectorOptions options, metrics::Registry& metrics);

  // One pass: collects what is due; returns how many directories went.
  int RunOnce();

  // Whether (job, attempt) was collected here, and when; attempt 0: the
  // job's highest collected attempt (its number in *attempt).
  std::optional<Collected> Find(int64_t job, int* attempt) const;

  // Keeps (job, attempt) from being collected while the result lives.
  std::shared_ptr<void> Hold(int64_t job, int attempt);

  // Percent of the data directory's filesystem in use (as df shows it); -1
  // when it cannot be read.
  static int DiskPercent(const std::string& path);
  // Bytes an unprivileged writer may still use there; -1 when unknown.
  static int64_t FreeBytes(const std::string& path);

 private:
  bool Collect(int64_t job, int attempt, int64_t ended, int64_t now);

  const CollectorOptions options_;
  metrics::Registry& metrics_;
  mutable util::Mutex mu_;
  std::map<std::pair<int64_t, int>, Collected> collected_ GUARDED_BY(mu_);
  std::map<std::pair<int64_t, int>, int> held_ GUARDED_BY(mu_);
};

}  // namespace pgfleet::hostd
