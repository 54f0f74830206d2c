#include "cli/waiting.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace pgfleet::cli {

std::string DescribeWaitedJob(const WaitedJob& j) {
  std::string head = "job " + std::to_string(j.id) + ": ";
  std::string why = j.error ? *j.error : "";
  switch (j.state) {
    case model::JobState::kPending:
      if (j.attempt > 0 && j.retry_in_seconds > 0) {
        char in[32];
        std::snprintf(in, sizeof in, "%.1f s", j.retry_in_seconds);
        return head + "attempt " + std::to_string(j.attempt) + " failed (" + why +
               "); retrying in " + in;
      }
      if (j.attempt == 0 && j.retry_in_seconds > 0 && why.empty()) {  // a delayed start
        char in[32];
        std::snprintf(in, sizeof in, "%.0f s", j.retry_in_seconds);
        return head + "pending: starts in " + in;
      }
      return head + "pending" + (why.empty() ? "" : ": " + why);
    case model::JobState::kAssigned:
      return head + "attempt " + std::to_string(j.attempt) + " placed on " + j.host_id;
    case model::JobState::kRunning:
      return head + "attempt " + std::to_string(j.attempt) + " running on " + j.host_id;
    default:
      return head + std::string(model::ToString(j.state)) + (why.empty() ? "" : ": " + why);
  }
}

int ExitCodeOfFinished(const WaitedJob& j) {
  if (j.state == model::JobState::kSucceeded) return 0;
  if (j.exit_code && *j.exit_code > 0) return *j.exit_code;
  if (j.signal) return 128 + *j.signal;
  return 1;
}

namespace {

// Made before the handler is installed; the handler only reads them (write
// and execv are async-signal-safe).
std::string g_message;
std::vector<std::string> g_then_run;
std::vector<char*> g_argv;

void Interrupted(int) {
  ssize_t ignored = write(2, g_message.data(), g_message.size());
  (void)ignored;
  if (!g_argv.empty()) execv("/proc/self/exe", g_argv.data());
  _exit(130);
}

}  // namespace

void OnInterrupt(const std::string& message, const std::vector<std::string>& then_run) {
  g_message = "\n" + message + "\n";
  g_then_run = then_run;
  g_argv.clear();
  for (auto& a : g_then_run) g_argv.push_back(a.data());
  if (!g_argv.empty()) g_argv.push_back(nullptr);
  signal(SIGINT, Interrupted);
}

}  // namespace pgfleet::cli
