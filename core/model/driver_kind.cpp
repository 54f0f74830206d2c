#include "core/model/driver_kind.h"

namespace pgfleet::model {

const char* DriverKindName(DriverKind kind) {
  switch (kind) {
    case DriverKind::kProcess:
      return "process";
    case DriverKind::kContainer:
      return "container";
    case DriverKind::kSim:
      return "sim";
  }
  return "process";
}

std::optional<DriverKind> ParseDriverKind(std::string_view name) {
  for (DriverKind k : {DriverKind::kProcess, DriverKind::kContainer, DriverKind::kSim}) {
    if (name == DriverKindName(k)) return k;
  }
  return std::nullopt;
}

DriverCapabilities CapabilitiesOf(DriverKind kind) {
  DriverCapabilities c;
  switch (kind) {
    case DriverKind::kProcess:
      c.runs_processes = true;
      break;
    case DriverKind::kContainer:
      c.runs_processes = c.isolates = c.has_cgroup = c.has_own_root = c.maps_job_ids =
          c.enforces_disk = true;
      break;
    case DriverKind::kSim:
      c.isolates = true;
      break;
  }
  return c;
}

}  // namespace pgfleet::model
