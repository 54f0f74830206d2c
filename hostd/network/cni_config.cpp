#include "hostd/network/cni_config.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include "core/model/json_limits.h"

namespace pgfleet::hostd::network {

using nlohmann::json;

namespace {

constexpr size_t kMaxConfBytes = 256 * 1024;
constexpr const char* kConfFile = "10-pgfleet.conflist";

// A plugin's type is a file name in the plugin directories, nothing more.
bool SafeType(const std::string& type) {
  static const std::regex name("^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$");
  return std::regex_match(type, name);
}

std::string ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw ConfigError("cannot open " + path + ": " + std::strerror(errno));
  std::string text;
  char buf[8192];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || text.size() + static_cast<size_t>(n) > kMaxConfBytes) {
      close(fd);
      throw ConfigError(path + ": " + (n < 0 ? std::strerror(errno) : "larger than 256 KiB"));
    }
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

}  // namespace

std::vector<std::string> ConfList::types() const {
  std::vector<std::string> out;
  for (const auto& p : plugins) {
    out.push_back(p.at("type").get<std::string>());
    auto ipam = p.find("ipam");
    if (ipam != p.end() && ipam->is_object() && ipam->contains("type")) {
      out.push_back(ipam->at("type").get<std::string>());
    }
  }
  return out;
}

ConfList ParseConfList(const std::string& text, const std::string& origin) {
  json j;
  try {
    j = model::ParseBoundedJson(text, origin);
  } catch (const std::exception& e) {
    throw ConfigError(origin + ": not JSON: " + e.what());
  }
  auto bad = [&](const std::string& rule) { return ConfigError(origin + ": " + rule); };
  if (!j.is_object()) throw bad("a network configuration list must be a JSON object");
  ConfList c;
  c.path = origin;
  auto str = [&](const char* field) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
      throw bad(std::string(field) + " must be a non-empty string");
    }
    return it->get<std::string>();
  };
  c.cni_version = str("cniVersion");
  c.name = str("name");
  static const std::regex name("^[a-zA-Z0-9][a-zA-Z0-9_.\\-]{0,63}$");
  if (!std::regex_match(c.name, name)) {
    throw bad("name must match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ (got \"" + c.name + "\")");
  }
  auto plugins = j.find("plugins");
  if (plugins == j.end() || !plugins->is_array() || plugins->empty()) {
    throw bad("plugins must be a non-empty array");
  }
  for (const auto& p : *plugins) {
    auto type = p.is_object() ? p.find("type") : p.end();
    if (!p.is_object() || type == p.end() || !type->is_string()) {
      throw bad("every entry of plugins must be an object with a string \"type\"");
    }
    if (!SafeType(type->get<std::string>())) {
      throw bad("plugins[].type must be a plain file name in the plugin directories (got \"" +
                type->get<std::string>() + "\")");
    }
    auto ipam = p.find("ipam");
    if (ipam != p.end() && ipam->is_object() && ipam->contains("type")) {
      const json& t = ipam->at("type");
      if (!t.is_string() || !SafeType(t.get<std::string>())) {
        throw bad("plugins[].ipam.type must be a plain file name in the plugin directories");
      }
    }
  }
  c.plugins = *plugins;
  return c;
}

ConfList LoadConfDir(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) throw ConfigError("cannot read --cni-config " + dir + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (auto* e = readdir(d)) {
    std::string n = e->d_name;
    const std::string ext = ".conflist";
    if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) {
      names.push_back(n);
    }
  }
  closedir(d);
  if (names.empty()) throw ConfigError("no *.conflist file in --cni-config " + dir);
  std::sort(names.begin(), names.end());
  const std::string path = dir + "/" + names.front();
  return ParseConfList(ReadSmallFile(path), path);
}

json DefaultConfList(const DefaultNetwork& net) {
  json ipam = {{"type", "host-local"},
               {"ranges", json::array({json::array({{{"subnet", net.subnet}}})})},
               {"routes", json::array({{{"dst", "0.0.0.0/0"}}})}};
  if (!net.ipam_dir.empty()) ipam["dataDir"] = net.ipam_dir;
  return json{
      {"cniVersion", "1.0.0"},
      {"name", net.name},
      {"plugins",
       json::array(
           {{{"type", "bridge"},
             {"bridge", net.bridge},
             {"isGateway", true},
             {"ipMasq", true},
             {"hairpinMode", true},
             {"ipam", ipam}},
            {{"type", "portmap"}, {"capabilities", {{"portMappings", true}}}, {"snat", true}},
            {{"type", "firewall"}}})}};
}

void MakeOwnDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw ConfigError("cannot create " + dir + ": " + std::strerror(errno));
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    throw ConfigError("cannot stat " + dir + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    throw ConfigError("refusing " + dir +
                      ": not a directory of hostd's own (a symbolic link, another user's, or "
                      "writable by others)");
  }
}

std::string WriteDefaultConfDir(const std::string& data_dir, const DefaultNetwork& net) {
  const std::string dir = data_dir + "/cni";
  MakeOwnDir(dir);
  const std::string text = DefaultConfList(net).dump(2) + "\n";
  const std::string tmp = dir + "/." + kConfFile + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  bool ok = fd >= 0 && write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (fd >= 0 && close(fd) != 0) ok = false;
  if (!ok || rename(tmp.c_str(), (dir + "/" + kConfFile).c_str()) != 0) {
    throw ConfigError("cannot write " + dir + "/" + kConfFile + ": " + std::strerror(errno));
  }
  return dir;
}

void CheckBridgeSubnet(const std::string& cidr) {
  auto bad = [&](const std::string& rule) {
    return std::invalid_argument("--bridge-subnet must be " + rule + " (got \"" + cidr + "\")");
  };
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos || cidr.size() > 18)
    throw bad("an IPv4 CIDR such as 10.89.0.0/16");
  const std::string addr = cidr.substr(0, slash), bits = cidr.substr(slash + 1);
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) throw bad("an IPv4 CIDR such as 10.89.0.0/16");
  if (bits.empty() || bits.size() > 2 ||
      bits.find_first_not_of("0123456789") != std::string::npos) {
    throw bad("an IPv4 CIDR such as 10.89.0.0/16");
  }
  const int n = std::stoi(bits);
  if (n < 8 || n > 30) throw bad("a CIDR with a prefix length from 8 to 30");
  const uint32_t host = ntohl(a.s_addr) & (n == 32 ? 0u : (0xffffffffu >> n));
  if (host != 0) throw bad("a network address, with no host bits set");
}

std::string FindPlugin(const std::string& type, const std::vector<std::string>& bin_dirs) {
  if (!SafeType(type)) return "";
  for (const auto& dir : bin_dirs) {
    const std::string path = dir + "/" + type;
    struct stat st;
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0) {
      return path;
    }
  }
  return "";
}

std::string MissingPlugins(const ConfList& conf, const std::vector<std::string>& bin_dirs) {
  std::string dirs;
  for (const auto& d : bin_dirs) dirs += (dirs.empty() ? "" : ", ") + d;
  for (const auto& type : conf.types()) {
    if (FindPlugin(type, bin_dirs).empty()) {
      return "CNI plugin " + type + " not found in " + dirs;
    }
  }
  return "";
}

}  // namespace pgfleet::hostd::network
