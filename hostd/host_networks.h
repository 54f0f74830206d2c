#pragma once
// What hostd registers as its networks (hosts.networks, network_note),
// decided once at its start from its flags and the CNI check.

#include <optional>
#include <string>

#include "hostd/agent/host_config.h"
#include "hostd/hostd_flags.h"
#include "hostd/network/bridge_check.h"

namespace pgfleet::hostd {

// Which networks this host offers (HostConfig::networks): bridge only with a
// driver that isolates jobs and a CNI configuration whose plugins are here
// (hostd/network/bridge_check.h). Returns the bridge's network when
// offered; config->network_note says why not otherwise.
std::optional<network::NetworkOptions> ResolveNetworks(const std::string& id, const HostdFlags& f,
                                                       HostConfig* config);

}  // namespace pgfleet::hostd
