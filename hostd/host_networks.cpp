#include "hostd/host_networks.h"

#include <spdlog/spdlog.h>

#include "hostd/drivers/driver.h"
#include "hostd/drivers/driver_factory.h"
#include "hostd/hollow/sim.h"

namespace pgfleet::hostd {

std::optional<network::NetworkOptions> ResolveNetworks(const std::string& id, const HostdFlags& f,
                                                       HostConfig* config) {
  if (f.driver_name == kSimDriver) return std::nullopt;
  if (!CapabilitiesOfDriver(f.driver_name).isolates) {
    config->network_note =
        "no bridge network: the " + f.driver_name + " driver runs jobs on the host's network";
    return std::nullopt;
  }
  network::DefaultNetwork net;
  net.subnet = f.bridge_subnet;
  auto check = network::CheckBridge(f.cni_config, f.cni_bin_dir, f.data_dir, net);
  if (!check.options) {
    config->network_note = check.missing;
    spdlog::warn("host={} {}", id, check.missing);
    return std::nullopt;
  }
  config->networks = {"host", "none", "bridge"};
  spdlog::info("host={} network bridge: CNI network {} (plugins from {})", id,
               check.options->conflist.value("name", std::string()),
               check.options->bin_dirs.front());
  return check.options;
}

}  // namespace pgfleet::hostd
