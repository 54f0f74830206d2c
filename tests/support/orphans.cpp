#include "orphans.h"

#include <sys/wait.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "hostd/attempt/attempt_dir.h"

namespace pgfleet::testing {

bool SameProcessAlive(pid_t pid, int64_t start_time) {
  if (start_time <= 0 || hostd::attempt::ProcStartTime(pid) != start_time) return false;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

void ReapOrphans(std::chrono::milliseconds patience) {
  auto deadline = std::chrono::steady_clock::now() + patience;
  while (true) {
    pid_t r = waitpid(-1, nullptr, WNOHANG);
    if (r < 0) return;  // ECHILD: nothing left
    if (r == 0) {
      if (std::chrono::steady_clock::now() > deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

}  // namespace pgfleet::testing
