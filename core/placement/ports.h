#pragma once
// Named ports in the placement core (internal to core/placement): how much
// of each host's port range is free, whether a job's ports fit a host
// without picking them, and why they do not. PickPorts itself is public
// (placement.h). docs/decisions/0017.

#include <cstdint>
#include <string>
#include <vector>

#include "core/placement/placement.h"

namespace pgfleet::placement {

// The free ports of each host's range, by host index, kept by a plan as it
// charges ports: what port 0 requests are checked against, so that
// checking a host costs no walk of its held ports.
using FreePorts = std::vector<int64_t>;

int64_t FreePortsOf(const HostView& host);
FreePorts FreePortsOfAll(const std::vector<HostView>& hosts);

// Whether PickPorts would find the job's ports on the host (with `free`
// ports free in its range), without picking them: no allocation, as this
// runs for every matching host.
bool PortsFit(const JobRequest& job, const HostView& host, int64_t free);

// "20000-32000", or "no ports".
std::string RangeText(const HostView& host);

// The first of job's ports `host` cannot give now, in words: "port 8080
// (ports.web) is held on h1", "ports.http: every port of h1's range
// 20000-20039 is held".
std::string PortShortfall(const JobRequest& job, const HostView& host);

// Why a job's ports could not be had on any of `matching` (indices into
// hosts) even with no port held, or "" when some host could give them.
std::string PortsNeverFit(const JobRequest& job, const std::vector<size_t>& matching,
                          const std::vector<HostView>& hosts);

}  // namespace pgfleet::placement
