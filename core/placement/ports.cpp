#include "core/placement/ports.h"

#include <algorithm>
#include <iterator>
#include <set>

namespace pgfleet::placement {

int64_t FreePortsOf(const HostView& host) {
  if (host.port_hi < host.port_lo) return 0;
  const auto& held = host.ports_held;
  const int64_t in_range =
      std::distance(held.lower_bound(host.port_lo), held.upper_bound(host.port_hi));
  return int64_t{host.port_hi} - host.port_lo + 1 - in_range;
}

FreePorts FreePortsOfAll(const std::vector<HostView>& hosts) {
  FreePorts out;
  out.reserve(hosts.size());
  for (const auto& h : hosts) out.push_back(FreePortsOf(h));
  return out;
}

bool PortsFit(const JobRequest& job, const HostView& host, int64_t free) {
  int64_t dynamic = 0;
  for (const auto& [name, port] : job.ports) {
    if (port == 0) {
      ++dynamic;
      continue;
    }
    const bool in_range = port >= host.port_lo && port <= host.port_hi;
    if (port < 1 || port > 65535 || host.ports_held.count(port) || (!job.privileged && !in_range))
      return false;
    free -= in_range;  // a named port of the range is not free for port 0
  }
  return dynamic <= free;
}

std::string RangeText(const HostView& host) {
  if (host.port_hi < host.port_lo) return "no ports";
  return std::to_string(host.port_lo) + "-" + std::to_string(host.port_hi);
}

std::string PortShortfall(const JobRequest& job, const HostView& host) {
  std::set<int> taken;
  for (const auto& [name, port] : job.ports) {
    if (port == 0) continue;
    if (!job.privileged && (port < host.port_lo || port > host.port_hi)) {
      return "port " + std::to_string(port) + " (ports." + name + ") is outside " + host.id +
             "'s port range " + RangeText(host);
    }
    if (host.ports_held.count(port)) {
      return "port " + std::to_string(port) + " (ports." + name + ") is held on " + host.id;
    }
    taken.insert(port);
  }
  int free = 0;
  for (int p = host.port_lo; p <= host.port_hi; ++p) {
    if (!host.ports_held.count(p) && !taken.count(p)) ++free;
  }
  for (const auto& [name, port] : job.ports) {
    if (port != 0) continue;
    if (free-- <= 0) {
      return "ports." + name + ": every port of " + host.id + "'s range " + RangeText(host) +
             " is held";
    }
  }
  return "";
}

std::string PortsNeverFit(const JobRequest& job, const std::vector<size_t>& matching,
                          const std::vector<HostView>& hosts) {
  size_t largest = 0;
  const HostView* outside = nullptr;
  for (size_t i : matching) {
    HostView empty = hosts[i];
    empty.ports_held.clear();
    if (PickPorts(job, empty)) return "";
    if (!outside) outside = &hosts[i];
    if (empty.port_hi >= empty.port_lo) {
      largest = std::max(largest, static_cast<size_t>(empty.port_hi - empty.port_lo + 1));
    }
  }
  for (const auto& [name, port] : job.ports) {
    if (port != 0 && !job.privileged && outside &&
        std::none_of(matching.begin(), matching.end(), [&, port = port](size_t i) {
          return port >= hosts[i].port_lo && port <= hosts[i].port_hi;
        })) {
      return "ports." + name + " asks for host port " + std::to_string(port) +
             ", outside every host's port range (e.g. " + outside->id + ": " + RangeText(*outside) +
             "): an unprivileged job may name only ports of its host's range";
    }
  }
  return "ports: " + std::to_string(job.ports.size()) + " ports asked; the largest port range of " +
         "a host that could run it holds " + std::to_string(largest);
}

std::optional<std::map<std::string, int>> PickPorts(const JobRequest& job, const HostView& host) {
  std::map<std::string, int> out;
  std::set<int> taken;  // this job's own named ports
  for (const auto& [name, port] : job.ports) {
    if (port == 0) continue;
    if (port < 1 || port > 65535 || host.ports_held.count(port) || taken.count(port))
      return std::nullopt;
    if (!job.privileged && (port < host.port_lo || port > host.port_hi)) return std::nullopt;
    out[name] = port;
    taken.insert(port);
  }
  // The lowest free ports, walking the held ones in order beside.
  int next = host.port_lo;
  auto held = host.ports_held.lower_bound(next);
  for (const auto& [name, port] : job.ports) {
    if (port != 0) continue;
    for (;; ++next) {
      while (held != host.ports_held.end() && *held < next) ++held;
      if (next > host.port_hi) return std::nullopt;
      if ((held == host.ports_held.end() || *held != next) && !taken.count(next)) break;
    }
    out[name] = next;
    taken.insert(next++);
  }
  return out;
}

}  // namespace pgfleet::placement
