#pragma once
// The fence watchdog: the host's own clock of its lease. The agent's thread
// notes every successful contact with the database (a heartbeat or a
// registration, by when it was *sent*, on CLOCK_BOOTTIME) and the host TTL
// the database judges it by; another thread (hostd's watchdog thread, or a
// hollow host runner's) calls Tick, which fences every job once no contact
// succeeded for SelfFenceAfter(ttl) (lease.h) and unfences when one does
// again (docs/failures-hostd.md). The lease file carries the last contact to
// the shims and to the next hostd.
//
// Thread domains: NoteContact, SetTtl, Begin, NoteFirstTry, TakeReregister
// on the agent's thread; Tick on the watchdog's; the atomics are what they share.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "core/metrics/metrics.h"
#include "hostd/fence/lease.h"

namespace pgfleet::hostd {

// What the watchdog fences: the host's jobs (Supervisor::Fence, Unfence).
struct FenceActions {
  // Kills every live job and refuses new ones with `reason`; how many it killed.
  std::function<size_t(const std::string& reason)> fence;
  std::function<void()> unfence;
};

class FenceWatchdog {
 public:
  // data_dir empty: no lease file (hollow hosts). ttl: until the database says.
  FenceWatchdog(std::string host_id, const std::string& data_dir, std::chrono::milliseconds ttl,
                metrics::Registry& metrics);
  void SetActions(FenceActions actions) { actions_ = std::move(actions); }

  // The lease continues from the previous hostd's last contact (restarting
  // never extends it); a first start begins it now.
  void Begin();
  // A contact sent at sent_boottime_ns succeeded: the lease runs from it.
  void NoteContact(int64_t sent_boottime_ns);
  void SetTtl(std::chrono::milliseconds ttl) { ttl_ms_ = ttl.count(); }
  std::chrono::milliseconds ttl() const { return std::chrono::milliseconds(ttl_ms_.load()); }
  // The first database round was tried (successful or not).
  void NoteFirstTry() { first_try_done_ = true; }
  // True (once) after the watchdog fenced: schedulers may have declared the
  // host lost, so it comes back as a new generation.
  bool TakeReregister() { return reregister_.exchange(false); }

  // The watchdog's check, every 100 ms.
  void Tick();

 private:
  const std::string host_id_;
  const std::string data_dir_;  // "": no lease file
  metrics::Registry& metrics_;
  FenceActions actions_;
  LeaseWriter lease_;
  std::atomic<int64_t> last_contact_{0};  // CLOCK_BOOTTIME ns; mirrored in the lease file
  std::atomic<int64_t> ttl_ms_{0};
  std::atomic<bool> reregister_{false};
  std::atomic<bool> first_try_done_{false};
  std::atomic<int64_t> started_ns_{0};
  // Tick's alone:
  bool fenced_ = false;
  std::string fence_reason_;
};

}  // namespace pgfleet::hostd
