#include "core/metrics/metrics.h"

#include <cstdio>

#include "core/util/mutex.h"

namespace pgfleet::metrics {

void Registry::Describe(const std::string& name, const std::string& help) {
  util::MutexLock lock(mu_);
  metrics_[name].help = help;
}

void Registry::Add(const std::string& name, double delta) {
  util::MutexLock lock(mu_);
  Metric& m = metrics_[name];
  m.value += delta;
  m.counter = true;
}

void Registry::Set(const std::string& name, double value) {
  util::MutexLock lock(mu_);
  Metric& m = metrics_[name];
  m.value = value;
  m.counter = false;
}

double Registry::Get(const std::string& name) const {
  util::MutexLock lock(mu_);
  auto it = metrics_.find(name);
  return it == metrics_.end() ? 0 : it->second.value;
}

std::string Registry::Render() const {
  util::MutexLock lock(mu_);
  std::string out;
  char value[64];
  for (const auto& [name, m] : metrics_) {
    std::snprintf(value, sizeof value, "%.17g", m.value);
    out += "# HELP " + name + " " + (m.help.empty() ? name : m.help) + "\n";
    out += "# TYPE " + name + (m.counter ? " counter\n" : " gauge\n");
    out += name + " " + value + "\n";
  }
  return out;
}

}  // namespace pgfleet::metrics
