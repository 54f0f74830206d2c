#pragma once
// What the placement tests (placement_*_test.cpp) build their inputs with:
// hosts (empty or partly used) and job requests in one line each, and a
// plan read as job id -> host id.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "core/placement/placement.h"

namespace pgfleet::placement::testing_placement {

inline HostView Host(std::string id, int cpu_total, int memory_total,
                     std::map<std::string, std::string> labels = {}) {
  HostView h;
  h.id = std::move(id);
  h.cpu_total = cpu_total;
  h.memory_total = memory_total;
  h.labels = std::move(labels);
  return h;
}

inline HostView Used(HostView h, int cpu_allocated, int memory_allocated) {
  h.cpu_allocated = cpu_allocated;
  h.memory_allocated = memory_allocated;
  return h;
}

inline JobRequest Job(int64_t id, int cpu, int memory, int priority = 50,
                      std::map<std::string, std::string> constraints = {}) {
  JobRequest j;
  j.id = id;
  j.cpu = cpu;
  j.memory = memory;
  j.priority = priority;
  j.constraints = std::move(constraints);
  return j;
}

// job id -> host id, for plans where the order of placements does not matter.
inline std::map<int64_t, std::string> Where(const Plan& plan) {
  std::map<int64_t, std::string> out;
  for (const auto& p : plan.placements) out[p.job_id] = p.host_id;
  return out;
}

}  // namespace pgfleet::placement::testing_placement
