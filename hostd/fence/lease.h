#pragma once
// The host's lease, shared by hostd and its shims through one file,
// <data_dir>/last-heartbeat: the CLOCK_BOOTTIME time (ns) at which the last
// successful heartbeat (or registration) was sent. Schedulers may declare the
// host lost once the database has not heard from it for the host TTL, so
// whoever runs a job stops it at SelfFenceAfter(ttl) past that time:
//
//   - hostd's fence watchdog, while hostd runs (it also refuses new work);
//   - each shim, so the guarantee holds while hostd is down, hung or
//     restarting: a killed hostd that stays away longer than the TTL must not
//     leave its jobs running next to their replacements.
//
// A restarted hostd reads the file instead of starting a fresh clock, so a
// crash-looping hostd cannot extend the lease without reaching the database.
// CLOCK_BOOTTIME is one clock for every process of the machine, never jumps,
// and counts suspended time (a host frozen for an hour has been away an hour).

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace pgfleet::hostd {

inline constexpr const char* kLeaseFile = "last-heartbeat";

// When the lease runs out: host_ttl minus a margin (500 ms, or a quarter of a
// short TTL) covering the watchdog's tick and the time the heartbeat spent in
// flight, so the jobs are dead before the database's clock can expire the host.
std::chrono::milliseconds SelfFenceAfter(std::chrono::milliseconds host_ttl);

// CLOCK_BOOTTIME now, in ns.
int64_t BootTimeNs();

// The recorded time, or nullopt when the file is missing or unreadable.
std::optional<int64_t> ReadLease(const std::string& data_dir);

// Records `boottime_ns` (one pwrite of a fixed-width line over the old one, so
// readers never see a mix). Keeps the file open between calls. Not thread-safe.
class LeaseWriter {
 public:
  explicit LeaseWriter(std::string data_dir);
  ~LeaseWriter();
  LeaseWriter(const LeaseWriter&) = delete;
  LeaseWriter& operator=(const LeaseWriter&) = delete;
  bool Write(int64_t boottime_ns);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace pgfleet::hostd
