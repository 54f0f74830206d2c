#pragma once
// A small Prometheus registry: named counters and gauges, rendered in the
// text exposition format (with # HELP and # TYPE lines). Thread-safe: every
// member takes mu_. Names are the caller's; a name is a counter once Add()
// has touched it and a gauge once Set() has.

#include <map>
#include <string>

#include "core/util/mutex.h"

namespace pgfleet::metrics {

class Registry {
 public:
  // Optional one-line help for a metric (shown as # HELP; the name otherwise).
  void Describe(const std::string& name, const std::string& help);
  void Add(const std::string& name, double delta);  // a counter
  void Set(const std::string& name, double value);  // a gauge
  std::string Render() const;                       // sorted by name
  double Get(const std::string& name) const;        // 0 for a name never touched

 private:
  struct Metric {
    double value = 0;
    bool counter = false;
    std::string help;
  };
  mutable util::Mutex mu_;
  std::map<std::string, Metric> metrics_ GUARDED_BY(mu_);
};

}  // namespace pgfleet::metrics
