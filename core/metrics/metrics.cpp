#include "core/metrics/metrics.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/util/mutex.h"

namespace pgfleet::metrics {

namespace {

std::string BaseName(const std::string& name) { return name.substr(0, name.find('{')); }

// The labels of a series name without braces: `state="x"` of `n{state="x"}`.
std::string Labels(const std::string& name) {
  const auto open = name.find('{');
  if (open == std::string::npos) return "";
  return name.substr(open + 1, name.size() - open - 2);
}

// The shortest text that reads back as v (0.0025, not 0.0025000000000000001).
std::string Number(double v) {
  char text[64];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v) break;
  }
  return text;
}

// `base_suffix{labels,extra}` (or without braces when both are empty).
std::string Series(const std::string& base, const std::string& suffix, const std::string& labels,
                   const std::string& extra) {
  std::string all = labels;
  if (!extra.empty()) all += (all.empty() ? "" : ",") + extra;
  return base + suffix + (all.empty() ? "" : "{" + all + "}");
}

}  // namespace

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> buckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,   1,      2.5,   5,    10,    30,   60};
  return buckets;
}

void Registry::Describe(const std::string& name, const std::string& help) {
  util::MutexLock lock(mu_);
  help_[BaseName(name)] = help;
}

void Registry::Add(const std::string& name, double delta) {
  util::MutexLock lock(mu_);
  Metric& m = metrics_[name];
  m.value += delta;
  m.kind = Kind::kCounter;
}

void Registry::Set(const std::string& name, double value) {
  util::MutexLock lock(mu_);
  Metric& m = metrics_[name];
  m.value = value;
  m.kind = Kind::kGauge;
}

void Registry::Observe(const std::string& name, double value, const std::vector<double>& buckets) {
  util::MutexLock lock(mu_);
  Metric& m = metrics_[name];
  if (m.kind != Kind::kHistogram) {
    m = Metric{};
    m.kind = Kind::kHistogram;
    m.bounds = buckets;
    m.in_bucket.assign(buckets.size(), 0);
  }
  const auto at = std::lower_bound(m.bounds.begin(), m.bounds.end(), value) - m.bounds.begin();
  if (static_cast<size_t>(at) < m.in_bucket.size()) ++m.in_bucket[at];
  ++m.count;
  m.value += value;
}

double Registry::Get(const std::string& name) const {
  util::MutexLock lock(mu_);
  auto it = metrics_.find(name);
  if (it == metrics_.end()) return 0;
  return it->second.kind == Kind::kHistogram ? static_cast<double>(it->second.count)
                                             : it->second.value;
}

std::string Registry::Render() const {
  util::MutexLock lock(mu_);
  // Series by base name, so each base's HELP and TYPE come once (by full
  // name, `a_total` would sort between `a` and `a{x="1"}`).
  std::map<std::string, std::vector<std::pair<const std::string*, const Metric*>>> bases;
  for (const auto& [name, m] : metrics_) bases[BaseName(name)].push_back({&name, &m});
  std::string out;
  for (const auto& [base, series] : bases) {
    const Kind kind = series.front().second->kind;
    auto help = help_.find(base);
    out += "# HELP " + base + " " + (help == help_.end() ? base : help->second) + "\n";
    out += "# TYPE " + base +
           (kind == Kind::kCounter ? " counter\n"
            : kind == Kind::kGauge ? " gauge\n"
                                   : " histogram\n");
    for (const auto& [name, m] : series) {
      if (m->kind != Kind::kHistogram) {
        out += *name + " " + Number(m->value) + "\n";
        continue;
      }
      const std::string labels = Labels(*name);
      uint64_t cumulative = 0;
      for (size_t i = 0; i < m->bounds.size(); ++i) {
        cumulative += m->in_bucket[i];
        out += Series(base, "_bucket", labels, "le=\"" + Number(m->bounds[i]) + "\"") + " " +
               std::to_string(cumulative) + "\n";
      }
      out += Series(base, "_bucket", labels, "le=\"+Inf\"") + " " + std::to_string(m->count) + "\n";
      out += Series(base, "_sum", labels, "") + " " + Number(m->value) + "\n";
      out += Series(base, "_count", labels, "") + " " + std::to_string(m->count) + "\n";
    }
  }
  return out;
}

}  // namespace pgfleet::metrics
