#pragma once
// A small Prometheus registry: named counters, gauges and histograms,
// rendered in the text exposition format (with # HELP and # TYPE lines).
// Thread-safe: every member takes mu_.
//
// Names are the caller's. A series may carry labels in its name,
// `pgfleet_jobs{state="pending"}`: the series of one base name
// (`pgfleet_jobs`) share its HELP and TYPE, and must all be of one kind.
// A name is a counter once Add() has touched it, a gauge once Set() has, a
// histogram once Observe() has (its buckets fixed by the first Observe).

#include <map>
#include <string>
#include <vector>

#include "core/util/mutex.h"

namespace pgfleet::metrics {

// Upper bounds (seconds) for latencies from a millisecond to a minute.
const std::vector<double>& LatencyBuckets();

class Registry {
 public:
  // Optional one-line help for a metric's base name (shown as # HELP; the
  // name otherwise).
  void Describe(const std::string& name, const std::string& help);
  void Add(const std::string& name, double delta);  // a counter
  void Set(const std::string& name, double value);  // a gauge
  // One observation of a histogram (e.g. a duration in seconds); `buckets`:
  // increasing upper bounds, +Inf implied.
  void Observe(const std::string& name, double value,
               const std::vector<double>& buckets = LatencyBuckets());
  std::string Render() const;                 // sorted by name
  double Get(const std::string& name) const;  // 0 for a name never touched; a histogram: its count

 private:
  enum class Kind { kCounter, kGauge, kHistogram };
  struct Metric {
    Kind kind = Kind::kGauge;
    double value = 0;                 // counter, gauge; a histogram's sum
    std::vector<double> bounds;       // a histogram's buckets
    std::vector<uint64_t> in_bucket;  // observations <= bounds[i] (not cumulative)
    uint64_t count = 0;               // a histogram's observations
  };
  mutable util::Mutex mu_;
  std::map<std::string, Metric> metrics_ GUARDED_BY(mu_);
  std::map<std::string, std::string> help_ GUARDED_BY(mu_);  // base name -> help
};

}  // namespace pgfleet::metrics
