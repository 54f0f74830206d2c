#include "hostd/network/attachment.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/model/json_limits.h"
#include "hostd/network/cni_plugin.h"

namespace pgfleet::hostd::network {

using nlohmann::json;

namespace {

constexpr size_t kMaxAttachmentBytes = 512 * 1024;

std::string Errno() { return std::strerror(errno); }

// An owned descriptor.
struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

int OpenDir(const std::string& dir) {
  return open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

// Replaces attempt_dir/kAttachmentFile with `a` (a new file renamed over it).
void Save(const std::string& attempt_dir, const Attachment& a) {
  Fd dir(OpenDir(attempt_dir));
  if (dir.fd < 0) throw ConfigError("cannot open " + attempt_dir + ": " + Errno());
  const std::string text = ToJson(a).dump();
  const std::string tmp = std::string(".") + kAttachmentFile + ".tmp";
  Fd f(openat(dir.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  bool ok = f.fd >= 0 && write(f.fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  if (!ok || renameat(dir.fd, tmp.c_str(), dir.fd, kAttachmentFile) != 0) {
    throw ConfigError("cannot save " + attempt_dir + "/" + kAttachmentFile + ": " + Errno());
  }
}

std::optional<Attachment> Load(const std::string& attempt_dir, std::string* error) {
  Fd dir(OpenDir(attempt_dir));
  if (dir.fd < 0) return std::nullopt;
  Fd f(openat(dir.fd, kAttachmentFile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (f.fd < 0) return std::nullopt;
  std::string text;
  char buf[16384];
  for (ssize_t n; (n = read(f.fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || text.size() > kMaxAttachmentBytes) break;
    text.append(buf, static_cast<size_t>(n));
  }
  try {
    return AttachmentFromJson(model::ParseBoundedJson(text, kAttachmentFile));
  } catch (const std::exception& e) {
    *error = attempt_dir + "/" + kAttachmentFile + " is unreadable: " + e.what();
    return std::nullopt;
  }
}

std::string JoinPath(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs) out += (out.empty() ? "" : ":") + d;
  return out;
}

// The configuration plugin i of the list is given (CNI spec: "name" and
// "cniVersion" from the list, prevResult, and the runtime's values for the
// capabilities it declares).
json PluginConfig(const Attachment& a, size_t i, const json& prev) {
  json conf = a.conflist.at("plugins").at(i);
  conf["name"] = a.conflist.at("name");
  conf["cniVersion"] = a.conflist.at("cniVersion");
  if (!prev.is_null()) conf["prevResult"] = prev;
  auto caps = conf.find("capabilities");
  if (caps != conf.end() && caps->is_object() && caps->value("portMappings", false) &&
      !a.ports.empty()) {
    json mappings = json::array();
    for (const auto& [name, port] : a.ports) {
      for (const char* proto : {"tcp", "udp"}) {
        mappings.push_back({{"hostPort", port}, {"containerPort", port}, {"protocol", proto}});
      }
    }
    conf["runtimeConfig"]["portMappings"] = mappings;
  }
  return conf;
}

PluginCall CallFor(const Attachment& a, const char* command, bool with_netns) {
  PluginCall call;
  call.command = command;
  call.container_id = a.container_id;
  call.netns = with_netns ? a.netns : "";
  call.ifname = a.ifname;
  call.path = JoinPath(a.bin_dirs);
  return call;
}

std::string Program(const Attachment& a, size_t i) {
  const std::string type = a.conflist.at("plugins").at(i).at("type").get<std::string>();
  std::string program = FindPlugin(type, a.bin_dirs);
  if (program.empty()) {
    throw PluginError(0, "CNI plugin " + type + " not found in " + JoinPath(a.bin_dirs));
  }
  return program;
}

void Pin(const std::string& netns_dir, const std::string& path, pid_t pid) {
  MakeOwnDir(netns_dir);
  Fd f(open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0400));
  if (f.fd < 0) throw ConfigError("cannot create " + path + ": " + Errno());
  const std::string ns = "/proc/" + std::to_string(pid) + "/ns/net";
  if (mount(ns.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    throw ConfigError("cannot pin the job's network namespace (bind " + ns + " on " + path +
                      "): " + Errno());
  }
}

// The namespace is still pinned at `path` (a mount of nsfs is there).
bool Pinned(const std::string& path) {
  struct stat st, parent;
  if (path.empty() || lstat(path.c_str(), &st) != 0) return false;
  if (stat(path.substr(0, path.rfind('/')).c_str(), &parent) != 0) return false;
  return st.st_dev != parent.st_dev;
}

void Unpin(const std::string& path) {
  if (path.empty()) return;
  while (umount2(path.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
  }
  unlink(path.c_str());
}

}  // namespace

json ToJson(const NetworkOptions& o) {
  return json{{"conflist", o.conflist}, {"bin_dirs", o.bin_dirs}, {"netns_dir", o.netns_dir}};
}

NetworkOptions NetworkOptionsFromJson(const json& j) {
  NetworkOptions o;
  o.conflist = j.at("conflist");
  ParseConfList(o.conflist.dump(), "the shim request's network");  // checks it again
  o.bin_dirs = j.at("bin_dirs").get<std::vector<std::string>>();
  o.netns_dir = j.at("netns_dir").get<std::string>();
  return o;
}

std::string Attachment::address() const {
  if (!result.is_object() || !result.contains("ips") || !result["ips"].is_array()) return "";
  std::string v6;
  for (const auto& ip : result["ips"]) {
    if (!ip.is_object() || !ip.contains("address") || !ip["address"].is_string()) continue;
    // Only an address of an interface in the job's namespace ("sandbox").
    if (ip.contains("interface") && ip["interface"].is_number_unsigned() &&
        result.contains("interfaces") && result["interfaces"].is_array()) {
      const auto idx = ip["interface"].get<size_t>();
      const json& ifs = result["interfaces"];
      if (idx >= ifs.size() || !ifs[idx].is_object() ||
          ifs[idx].value("sandbox", std::string()).empty()) {
        continue;
      }
    }
    std::string addr = ip["address"].get<std::string>();
    addr = addr.substr(0, addr.find('/'));
    if (addr.find(':') == std::string::npos) return addr;
    if (v6.empty()) v6 = addr;
  }
  return v6;
}

json ToJson(const Attachment& a) {
  return json{{"container_id", a.container_id},
              {"netns", a.netns},
              {"ifname", a.ifname},
              {"conflist", a.conflist},
              {"bin_dirs", a.bin_dirs},
              {"ports", a.ports},
              {"result", a.result}};
}

Attachment AttachmentFromJson(const json& j) {
  Attachment a;
  a.container_id = j.at("container_id").get<std::string>();
  if (a.container_id.rfind("pgfleet-", 0) != 0 ||
      a.container_id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") !=
          std::string::npos) {
    throw std::invalid_argument("container_id must be pgfleet-<scope>-<job>-<attempt>");
  }
  a.netns = j.at("netns").get<std::string>();
  a.ifname = j.at("ifname").get<std::string>();
  a.conflist = j.at("conflist");
  ParseConfList(a.conflist.dump(), kAttachmentFile);
  a.bin_dirs = j.at("bin_dirs").get<std::vector<std::string>>();
  a.ports = j.at("ports").get<std::map<std::string, int>>();
  a.result = j.at("result");
  return a;
}

std::string ContainerId(const std::string& scope, int64_t job_id, int attempt) {
  return "pgfleet-" + scope + "-" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

Attachment Attach(const NetworkOptions& options, const std::string& attempt_dir,
                  const std::string& container_id, pid_t pid,
                  const std::map<std::string, int>& ports) {
  Attachment a;
  a.container_id = container_id;
  a.conflist = options.conflist;
  a.bin_dirs = options.bin_dirs;
  a.ports = ports;
  a.netns = options.netns_dir + "/" + container_id;
  // Saved first: a crash from here on leaves what DEL needs.
  Save(attempt_dir, a);
  try {
    Pin(options.netns_dir, a.netns, pid);
    json prev = nullptr;
    for (size_t i = 0; i < a.conflist.at("plugins").size(); ++i) {
      json out = RunPlugin(Program(a, i), CallFor(a, "ADD", true), PluginConfig(a, i, prev));
      if (!out.is_object()) {
        throw PluginError(0, "CNI plugin " + a.conflist["plugins"][i]["type"].get<std::string>() +
                                 " ADD printed no result");
      }
      prev = out;
      a.result = prev;
    }
    Save(attempt_dir, a);
  } catch (const std::exception&) {
    std::string ignored;
    Detach(a, attempt_dir, &ignored);
    throw;
  }
  return a;
}

void Check(const Attachment& a) {
  for (size_t i = 0; i < a.conflist.at("plugins").size(); ++i) {
    RunPlugin(Program(a, i), CallFor(a, "CHECK", true), PluginConfig(a, i, a.result));
  }
}

bool Detach(const Attachment& a, const std::string& attempt_dir, std::string* error) {
  const bool pinned = Pinned(a.netns);
  std::string first;
  const size_t n = a.conflist.at("plugins").size();
  for (size_t i = n; i-- > 0;) {
    try {
      RunPlugin(Program(a, i), CallFor(a, "DEL", pinned), PluginConfig(a, i, a.result));
    } catch (const std::exception& e) {
      if (first.empty()) first = e.what();  // the others still run: leave as little as we can
    }
  }
  if (!first.empty()) {
    *error = first;
    return false;
  }
  Unpin(a.netns);
  Fd dir(OpenDir(attempt_dir));
  if (dir.fd >= 0) unlinkat(dir.fd, kAttachmentFile, 0);
  return true;
}

bool DetachSaved(const std::string& attempt_dir, std::string* error) {
  try {
    auto a = Load(attempt_dir, error);
    if (!a) return error->empty();
    return Detach(*a, attempt_dir, error);
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

bool CheckSaved(const std::string& attempt_dir, std::string* error) {
  try {
    auto a = Load(attempt_dir, error);
    if (!a) return error->empty();
    Check(*a);
    return true;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
}

bool HasSavedAttachment(const std::string& attempt_dir) {
  Fd dir(OpenDir(attempt_dir));
  struct stat st;
  return dir.fd >= 0 && fstatat(dir.fd, kAttachmentFile, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

}  // namespace pgfleet::hostd::network
