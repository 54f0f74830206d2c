#pragma once
// Whether this host can offer network "bridge", decided once at hostd's
// start: the configuration (--cni-config, else the default hostd writes)
// parses, and every plugin it names is an executable in the plugin
// directories. hostd registers networks {host, none, bridge} when so, and
// {host, none} with the reason (hosts.network_note) when not.

#include <optional>
#include <string>
#include <vector>

#include "hostd/network/attachment.h"
#include "hostd/network/cni_config.h"

namespace pgfleet::hostd::network {

// Where plugins are looked for when --cni-bin-dir is not given.
inline const std::vector<std::string>& DefaultBinDirs() {
  static const std::vector<std::string> dirs = {"/usr/lib/cni", "/opt/cni/bin"};
  return dirs;
}

struct BridgeCheck {
  std::optional<NetworkOptions> options;  // set when bridge works here
  std::string missing;                    // else why not: "no bridge network: ..."
};

// conf_dir: --cni-config ("" = write the default into data_dir/cni);
// bin_dir: --cni-bin-dir ("" = DefaultBinDirs()). Never throws.
BridgeCheck CheckBridge(const std::string& conf_dir, const std::string& bin_dir,
                        const std::string& data_dir, const DefaultNetwork& default_network);

}  // namespace pgfleet::hostd::network
