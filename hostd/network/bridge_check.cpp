#include "hostd/network/bridge_check.h"

#include <unistd.h>

namespace pgfleet::hostd::network {

namespace {

// The plugins that change the firewall run iptables (through the PATH
// cni_plugin.cpp gives them).
bool NeedsIptables(const ConfList& conf) {
  for (const auto& t : conf.types()) {
    if (t == "bridge" || t == "portmap" || t == "firewall") return true;
  }
  return false;
}

bool HaveIptables() {
  for (const char* dir : {"/usr/local/sbin", "/usr/sbin", "/sbin", "/usr/bin", "/bin"}) {
    if (access((std::string(dir) + "/iptables").c_str(), X_OK) == 0) return true;
  }
  return false;
}

}  // namespace

BridgeCheck CheckBridge(const std::string& conf_dir, const std::string& bin_dir,
                        const std::string& data_dir, const DefaultNetwork& default_network) {
  BridgeCheck check;
  NetworkOptions o;
  o.bin_dirs = bin_dir.empty() ? DefaultBinDirs() : std::vector<std::string>{bin_dir};
  o.netns_dir = data_dir + "/" + kNetnsDir;
  try {
    const std::string dir =
        conf_dir.empty() ? WriteDefaultConfDir(data_dir, default_network) : conf_dir;
    ConfList conf = LoadConfDir(dir);
    if (std::string missing = MissingPlugins(conf, o.bin_dirs); !missing.empty()) {
      check.missing = "no bridge network: " + missing;
      return check;
    }
    if (NeedsIptables(conf) && !HaveIptables()) {
      check.missing = "no bridge network: iptables not found (its CNI plugins run it)";
      return check;
    }
    o.conflist = {{"cniVersion", conf.cni_version}, {"name", conf.name}, {"plugins", conf.plugins}};
    check.options = o;
  } catch (const std::exception& e) {
    check.missing = std::string("no bridge network: ") + e.what();
  }
  return check;
}

}  // namespace pgfleet::hostd::network
