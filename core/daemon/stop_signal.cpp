#include "core/daemon/stop_signal.h"

#include <csignal>

namespace pgfleet::daemon {
namespace {

std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void OnStopSignal(int) { g_stop = true; }

}  // namespace

const std::atomic<bool>& InstallStopSignals() {
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGPIPE, SIG_IGN);
  return g_stop;
}

}  // namespace pgfleet::daemon
