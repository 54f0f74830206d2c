#include "hostd/fence/watchdog.h"

#include <spdlog/spdlog.h>

#include <optional>

namespace pgfleet::hostd {

FenceWatchdog::FenceWatchdog(std::string host_id, const std::string& data_dir,
                             std::chrono::milliseconds ttl, metrics::Registry& metrics)
    : host_id_(std::move(host_id)), data_dir_(data_dir), metrics_(metrics), lease_(data_dir) {
  ttl_ms_ = ttl.count();
}

void FenceWatchdog::Begin() {
  std::optional<int64_t> lease;
  if (!data_dir_.empty()) lease = ReadLease(data_dir_);
  if (lease) {
    last_contact_ = *lease;
  } else {
    NoteContact(BootTimeNs());
  }
  started_ns_ = BootTimeNs();
}

void FenceWatchdog::NoteContact(int64_t sent_boottime_ns) {
  last_contact_ = sent_boottime_ns;
  if (data_dir_.empty()) return;
  if (!lease_.Write(sent_boottime_ns)) {
    spdlog::warn("host={} cannot write {}/{}: shims may fence their jobs early", host_id_,
                 data_dir_, kLeaseFile);
  }
}

void FenceWatchdog::Tick() {
  auto ttl = std::chrono::milliseconds(ttl_ms_.load());
  auto silent = std::chrono::nanoseconds(BootTimeNs() - last_contact_.load());
  bool overdue = silent > SelfFenceAfter(ttl);
  // A hostd restarted after the lease ran out tries the database once
  // before fencing what it re-attached to: if it gets through, the
  // reconcile kills exactly the attempts that were superseded meanwhile.
  // (Bounded: a first try that hangs does not delay the fence past one more lease.)
  if (overdue && !first_try_done_ &&
      std::chrono::nanoseconds(BootTimeNs() - started_ns_.load()) < SelfFenceAfter(ttl)) {
    return;
  }
  if (overdue && !fenced_) {
    fenced_ = true;
    reregister_ = true;
    fence_reason_ =
        fmt::format("hostd self-fenced: no successful heartbeat for {:.1f} s (host TTL {:.1f} s)",
                    std::chrono::duration<double>(silent).count(), ttl.count() / 1000.0);
    size_t n = actions_.fence ? actions_.fence(fence_reason_) : 0;
    metrics_.Add("pgfleet_host_self_fences_total", 1);
    spdlog::error("host={} {}: SIGKILL to {} live job(s), no new ones until the database is back",
                  host_id_, fence_reason_, n);
  } else if (overdue) {
    if (actions_.fence)
      actions_.fence(fence_reason_);  // anything started meanwhile (same state: no log)
  } else if (fenced_) {
    fenced_ = false;
    if (actions_.unfence) actions_.unfence();
    spdlog::warn("host={} heartbeat succeeded again: self-fence lifted", host_id_);
  }
  metrics_.Set("pgfleet_host_fenced", fenced_ ? 1 : 0);
}

}  // namespace pgfleet::hostd
