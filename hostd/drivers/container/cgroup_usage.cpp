// What a job's cgroup has used: the totals at its end (JobCgroup::ReadUsage)
// and a reading while it runs (ReadCgroupNow), from cgroup v2 or v1 files.
// (The cgroups themselves: cgroup.cpp.)

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

#include "core/util/text.h"
#include "hostd/drivers/container/cgroup.h"

namespace pgfleet::hostd {
namespace {

int64_t ParseInt(const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); }

// Value of "key N" in a flat-keyed file (memory.oom_control, memory.events, cpu.stat).
int64_t KeyedValue(const std::string& text, const std::string& key) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (text.compare(pos, key.size(), key) == 0 && pos + key.size() < eol &&
        text[pos + key.size()] == ' ') {
      return ParseInt(text.substr(pos + key.size() + 1, eol - pos - key.size() - 1));
    }
    pos = eol + 1;
  }
  return 0;
}

}  // namespace

CgroupUsage JobCgroup::ReadUsage() const {
  CgroupUsage u;
  if (destroyed_) return u;
  if (sys_.unified()) {
    u.oom_kills = KeyedValue(util::ReadFileOrEmpty(File("memory", "memory.events")), "oom_kill");
    u.peak_memory_bytes =
        ParseInt(util::ReadFileOrEmpty(File("memory", "memory.peak")));  // Linux 5.19+
    u.cpu_seconds = KeyedValue(util::ReadFileOrEmpty(File("cpu", "cpu.stat")), "usage_usec") / 1e6;
  } else {
    u.oom_kills =
        KeyedValue(util::ReadFileOrEmpty(File("memory", "memory.oom_control")), "oom_kill");
    u.peak_memory_bytes =
        ParseInt(util::ReadFileOrEmpty(File("memory", "memory.max_usage_in_bytes")));
    u.cpu_seconds = ParseInt(util::ReadFileOrEmpty(File("cpuacct", "cpuacct.usage"))) / 1e9;
  }
  return u;
}

std::optional<CgroupNow> ReadCgroupNow(const CgroupSystem& sys, const std::string& path) {
  // A group that is gone has no files; "0" from an existing one is a reading.
  auto read = [&](const char* controller, const char* file, std::string* out) {
    *out = util::ReadFileOrEmpty(sys.Dir(controller, path) + "/" + file);
    return !out->empty();
  };
  std::string cpu, mem;
  CgroupNow now;
  if (sys.unified()) {
    if (!read("cpu", "cpu.stat", &cpu) || !read("memory", "memory.current", &mem)) return {};
    now.cpu_seconds = KeyedValue(cpu, "usage_usec") / 1e6;
  } else {
    if (!read("cpuacct", "cpuacct.usage", &cpu) || !read("memory", "memory.usage_in_bytes", &mem))
      return {};
    now.cpu_seconds = ParseInt(cpu) / 1e9;
  }
  now.memory_bytes = ParseInt(mem);
  return now;
}

}  // namespace pgfleet::hostd
