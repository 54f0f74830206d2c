#pragma once
// A CNI network configuration list (CNI spec 1.0, "Network configuration
// lists"): which one hostd uses, and the default one it writes when the
// operator gives none. docs/networking.md has the operator's view.
//
// What must hold: a configuration comes only from a directory the operator
// names (--cni-config) or from hostd's own data dir, never from anything a
// job can write; every plugin it names is a bare file name (no '/'), looked
// up in the plugin directories hostd was given (--cni-bin-dir), so a
// configuration cannot make root run a program from anywhere else.

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace pgfleet::hostd::network {

// A configuration that cannot be used; the message names the file, the
// field and the rule.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ConfList {
  std::string path;         // the file it was read from
  std::string name;         // "name": the network's name (host-local keys addresses by it)
  std::string cni_version;  // "cniVersion"
  nlohmann::json plugins;   // "plugins": one object per plugin, each with a "type"
  // The plugin programs it runs: each plugin's type, and its ipam's.
  std::vector<std::string> types() const;
};

// Parses a .conflist text (origin names it in errors). Throws ConfigError.
ConfList ParseConfList(const std::string& text, const std::string& origin);

// The first *.conflist file of dir in lexical order (as libcni picks one),
// parsed. Throws ConfigError when there is none or it is unusable.
ConfList LoadConfDir(const std::string& dir);

// The network hostd sets up when the operator gives no configuration: one
// bridge with NAT, host-local addresses, port mappings and the firewall
// plugin's isolation rules.
struct DefaultNetwork {
  std::string name = "pgfleet";
  std::string bridge = "pgfleet0";
  std::string subnet = "10.89.0.0/16";  // --bridge-subnet
  // host-local's dataDir: shared by every hostd of the machine (its lock
  // keeps one address from being given twice); "" = host-local's default.
  std::string ipam_dir;
};
nlohmann::json DefaultConfList(const DefaultNetwork& net);
// Writes DefaultConfList into <data_dir>/cni/ (replacing what was there)
// and returns that directory. Throws ConfigError.
std::string WriteDefaultConfDir(const std::string& data_dir, const DefaultNetwork& net);

// Creates dir (mode 0700) unless it exists, and checks that it is a real
// directory of this process's user, not a symbolic link or another's:
// hostd writes there as root. Throws ConfigError naming it.
void MakeOwnDir(const std::string& dir);

// An IPv4 CIDR "a.b.c.d/n" with 8 <= n <= 30 and no host bits set; throws
// std::invalid_argument naming --bridge-subnet, the value and the rule.
void CheckBridgeSubnet(const std::string& cidr);

// Where plugin `type` is: the first directory of bin_dirs holding an
// executable regular file of that name; "" when none does.
std::string FindPlugin(const std::string& type, const std::vector<std::string>& bin_dirs);
// What keeps `conf` from working with these plugin directories ("" when
// nothing does): "CNI plugin portmap not found in /usr/lib/cni".
std::string MissingPlugins(const ConfList& conf, const std::vector<std::string>& bin_dirs);

}  // namespace pgfleet::hostd::network
