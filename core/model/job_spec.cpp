#include "core/model/job_spec.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

#include "core/model/constants.h"
#include "core/model/json_limits.h"
#include "core/model/spec_fields.h"

namespace pgfleet::model {
namespace {

using nlohmann::json;

std::string Show(const json& v) { return ShowJson(v); }

std::map<std::string, std::string> StringMap(const json& j, const char* field) {
  std::map<std::string, std::string> out;
  auto it = j.find(field);
  if (it == j.end() || it->is_null()) return out;
  if (!it->is_object()) {
    throw SpecError(field,
                    std::string(field) + " must be an object of strings (got " + Show(*it) + ")");
  }
  for (auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      throw SpecError(field, std::string(field) + " must be an object of strings (" + field + "." +
                                 k + " is " + Show(v) + ")");
    }
    out[k] = v.get<std::string>();
  }
  return out;
}

// Bytes of a string map's names and values together.
size_t MapBytes(const std::map<std::string, std::string>& m) {
  size_t n = 0;
  for (const auto& [k, v] : m) n += k.size() + v.size();
  return n;
}

// The size limits (constants.h), with the database's messages.
void ValidateSizes(const JobSpec& s) {
  auto over = [](size_t got, int limit, const char* what) {
    return std::string(what) + " must be at most " + std::to_string(limit) + " bytes (got " +
           std::to_string(got) + ")";
  };
  if (s.command.size() > static_cast<size_t>(kMaxCommandArgs)) {
    throw SpecError("command", "command must have at most " + std::to_string(kMaxCommandArgs) +
                                   " arguments (got " + std::to_string(s.command.size()) + ")");
  }
  size_t command_bytes = 0;
  for (const auto& a : s.command) command_bytes += a.size();
  if (command_bytes > static_cast<size_t>(kMaxCommandBytes)) {
    throw SpecError("command", over(command_bytes, kMaxCommandBytes, "command"));
  }
  if (MapBytes(s.env) > static_cast<size_t>(kMaxEnvBytes)) {
    throw SpecError("env", over(MapBytes(s.env), kMaxEnvBytes, "env"));
  }
  if (MapBytes(s.constraints) > static_cast<size_t>(kMaxConstraintsBytes)) {
    throw SpecError("constraints",
                    over(MapBytes(s.constraints), kMaxConstraintsBytes, "constraints"));
  }
  if (s.rootfs.size() > static_cast<size_t>(kMaxPathBytes)) {
    throw SpecError("rootfs", over(s.rootfs.size(), kMaxPathBytes, "rootfs"));
  }
  if (s.user.size() > static_cast<size_t>(kMaxPathBytes)) {
    throw SpecError("user", over(s.user.size(), kMaxPathBytes, "user"));
  }
  if (auto problem = UserProblem(s.user)) throw SpecError("user", *problem);
}

}  // namespace

std::optional<std::string> UserProblem(const std::string& user) {
  static const std::regex form("^([A-Za-z_][A-Za-z0-9._-]{0,31}|[0-9]{1,10}(:[0-9]{1,10})?)$");
  if (user.empty()) return std::nullopt;
  if (!std::regex_match(user, form)) {
    return "user must be a name (a letter or _, then at most 31 of A-Z a-z 0-9 . _ -) or "
           "uid[:gid] in decimal (got \"" + user + "\")";
  }
  if (user[0] >= '0' && user[0] <= '9') {
    for (size_t start = 0; start < user.size();) {
      size_t end = user.find(':', start);
      if (end == std::string::npos) end = user.size();
      if (std::stoll(user.substr(start, end - start)) > kMaxJobUserId) {
        return "user ids must be at most " + std::to_string(kMaxJobUserId) + " (got \"" + user +
               "\")";
      }
      start = end + 1;
    }
  }
  return std::nullopt;
}

JobSpec ParseJobSpec(const json& j) {
  if (!j.is_object()) throw SpecError("spec", "spec must be a JSON object (got " + Show(j) + ")");
  static const std::set<std::string> known = {"command",
                                              "env",
                                              "cpu",
                                              "memory",
                                              "constraints",
                                              "priority",
                                              "max_attempts",
                                              "formation",
                                              "rootfs",
                                              "user",
                                              "network",
                                              "pids_max",
                                              "cpu_hard_limit",
                                              "stop_grace_seconds",
                                              "log_max_files",
                                              "log_max_file_mb",
                                              "disk",
                                              "seccomp",
                                              "health_check",
                                              "ports",
                                              "files",
                                              "privileged"};
  for (auto& [k, v] : j.items()) {
    if (!known.count(k)) throw SpecError(k, "unknown field " + k);
  }
  JobSpec s;
  auto cmd = j.find("command");
  if (cmd == j.end() || !cmd->is_array()) {
    throw SpecError("command", "command must be a non-empty array of strings");
  }
  for (auto& a : *cmd) {
    if (!a.is_string()) {
      throw SpecError("command", "command must be an array of strings (got " + Show(a) + ")");
    }
    s.command.push_back(a.get<std::string>());
  }
  s.env = StringMap(j, "env");
  s.constraints = StringMap(j, "constraints");
  s.cpu = IntField(j, "cpu", kDefaultCpu);
  s.memory = IntField(j, "memory", kDefaultMemory);
  s.priority = IntField(j, "priority", kDefaultPriority);
  s.max_attempts = IntField(j, "max_attempts", 1);
  s.formation = StringField(j, "formation", "default");
  s.rootfs = StringField(j, "rootfs", "");
  s.user = StringField(j, "user", "");
  s.network = StringField(j, "network", "host");
  s.pids_max = IntField(j, "pids_max", kDefaultPidsMax);
  s.stop_grace_seconds = IntField(j, "stop_grace_seconds", kDefaultStopGraceSeconds);
  s.log_max_files = IntField(j, "log_max_files", 0);
  s.log_max_file_mb = IntField(j, "log_max_file_mb", 0);
  s.disk = IntField(j, "disk", 0);
  s.seccomp = StringField(j, "seccomp", "default");
  if (auto it = j.find("health_check"); it != j.end() && !it->is_null()) {
    s.health_check = ParseHealthCheck(*it);
  }
  if (auto it = j.find("ports"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) {
      throw SpecError("ports", "ports must be an object of name: port (got " + Show(*it) + ")");
    }
    for (auto& [name, port] : it->items()) {
      if (!port.is_number_integer()) {
        throw SpecError("ports", "ports." + name + " must be a whole number from 0 to 65535 (got " +
                                     Show(port) + ")");
      }
      auto v = port.get<int64_t>();
      if (v < 0 || v > 65535) {
        throw SpecError("ports", "ports." + name + " must be a whole number from 0 to 65535 (got " +
                                     std::to_string(v) + ")");
      }
      s.ports[name] = static_cast<int>(v);
    }
  }
  if (auto it = j.find("files"); it != j.end()) s.files = ParseJobFiles(*it);
  for (auto [name, field] :
       {std::pair{"cpu_hard_limit", &s.cpu_hard_limit}, std::pair{"privileged", &s.privileged}}) {
    if (auto it = j.find(name); it != j.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        throw SpecError(name, std::string(name) + " must be true or false (got " + Show(*it) + ")");
      }
      *field = it->get<bool>();
    }
  }
  Validate(s);
  return s;
}

void Validate(const JobSpec& s) {
  auto got = [](auto v) { return " (got " + std::to_string(v) + ")"; };
  if (s.command.empty()) throw SpecError("command", "command must not be empty");
  if (s.command[0].empty()) throw SpecError("command", "command[0] must not be empty");
  for (auto& a : s.command) {
    if (a.find('\0') != std::string::npos) {
      throw SpecError("command", "command arguments must not contain NUL bytes");
    }
  }
  if (s.cpu <= 0) throw SpecError("cpu", "cpu must be > 0" + got(s.cpu));
  if (s.memory <= 0) throw SpecError("memory", "memory must be > 0" + got(s.memory));
  if (s.priority < 0 || s.priority > 100) {
    throw SpecError("priority", "priority must be between 0 and 100" + got(s.priority));
  }
  if (s.max_attempts < 1)
    throw SpecError("max_attempts", "max_attempts must be >= 1" + got(s.max_attempts));
  if (s.formation.empty()) throw SpecError("formation", "formation must not be empty");
  for (auto& [k, v] : s.env) {
    if (k.empty() || k.find('=') != std::string::npos) {
      throw SpecError("env", "env names must be non-empty and contain no '=' (got \"" + k + "\")");
    }
  }
  ValidateSizes(s);
  if (s.network != "host" && s.network != "none" && s.network != "bridge") {
    throw SpecError("network", "network must be \"host\", \"none\" or \"bridge\" (got \"" +
                                   s.network + "\")");
  }
  ValidatePorts(s.ports);
  if (s.pids_max <= 0) throw SpecError("pids_max", "pids_max must be > 0" + got(s.pids_max));
  if (s.stop_grace_seconds < 0) {
    throw SpecError("stop_grace_seconds",
                    "stop_grace_seconds must be >= 0" + got(s.stop_grace_seconds));
  }
  if (s.disk < 0 || s.disk > kMaxDiskMib) {
    throw SpecError("disk", "disk must be between 0 and " + std::to_string(kMaxDiskMib) +
                                " (MiB; 0 = no limit)" + got(s.disk));
  }
  if (s.seccomp != "default" && s.seccomp != "unconfined") {
    throw SpecError("seccomp",
                    "seccomp must be 'default' or 'unconfined' (got \"" + s.seccomp + "\")");
  }
  auto bounded = [&](const char* field, int v, int lo, int hi) {
    if (v != 0 && (v < lo || v > hi)) {
      throw SpecError(field, std::string(field) + " must be between " + std::to_string(lo) +
                                 " and " + std::to_string(hi) + got(v));
    }
  };
  bounded("log_max_files", s.log_max_files, kMinLogMaxFiles, kMaxLogMaxFiles);
  bounded("log_max_file_mb", s.log_max_file_mb, kMinLogMaxFileMb, kMaxLogMaxFileMb);
  if (s.health_check) Validate(*s.health_check);
  ValidateJobFiles(s.files);
}

nlohmann::json ToJson(const JobSpec& s) {
  return json{{"command", s.command},
              {"env", s.env},
              {"cpu", s.cpu},
              {"memory", s.memory},
              {"constraints", s.constraints},
              {"priority", s.priority},
              {"max_attempts", s.max_attempts},
              {"formation", s.formation},
              {"rootfs", s.rootfs},
              {"user", s.user},
              {"network", s.network},
              {"pids_max", s.pids_max},
              {"cpu_hard_limit", s.cpu_hard_limit},
              {"stop_grace_seconds", s.stop_grace_seconds},
              {"log_max_files", s.log_max_files},
              {"log_max_file_mb", s.log_max_file_mb},
              {"disk", s.disk},
              {"seccomp", s.seccomp},
              {"health_check", s.health_check ? ToJson(*s.health_check) : json(nullptr)},
              {"ports", s.ports.empty() ? json(nullptr) : json(s.ports)},
              {"files", ToJson(s.files)},
              {"privileged", s.privileged}};
}

void ValidatePorts(const std::map<std::string, int>& ports) {
  static const std::regex name("^[a-z][a-z0-9_]{0,31}$");
  if (ports.size() > static_cast<size_t>(kMaxPorts)) {
    throw SpecError("ports", "ports must be an object of at most " + std::to_string(kMaxPorts) +
                                 " names (got " + std::to_string(ports.size()) + ")");
  }
  std::map<int, std::string> seen;
  for (const auto& [n, port] : ports) {
    if (!std::regex_match(n, name)) {
      throw SpecError("ports", "ports names must match ^[a-z][a-z0-9_]{0,31}$ (got \"" + n + "\")");
    }
    if (port < 0 || port > 65535) {
      throw SpecError("ports", "ports." + n + " must be a whole number from 0 to 65535 (got " +
                                   std::to_string(port) + ")");
    }
    if (port != 0) {
      auto [it, fresh] = seen.emplace(port, n);
      if (!fresh) {
        throw SpecError("ports", "ports must not name one port number twice (ports." + it->second +
                                     " and ports." + n + " are both " + std::to_string(port) + ")");
      }
    }
  }
}

std::map<std::string, std::string> JobPortEnv(const std::map<std::string, int>& ports,
                                              const std::string& host_address) {
  std::map<std::string, std::string> env;
  for (const auto& [n, port] : ports) {
    std::string upper = n;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    env["PGFLEET_PORT_" + upper] = std::to_string(port);
    env["PGFLEET_ADDR_" + upper] = host_address + ":" + std::to_string(port);
  }
  return env;
}

std::optional<std::pair<std::string, std::string>> PrivilegeProblem(const JobSpec& s) {
  static const std::regex root("^(root|0+)(:.*)?$");
  static const std::regex name("^[A-Za-z0-9_-][A-Za-z0-9._-]*$");
  static const std::regex root_group("^[0-9]+:0+$");
  static const std::regex ids("^[0-9]+(:[0-9]+)?$");
  if (std::regex_match(s.user, root)) {
    return std::pair{std::string("user"), "user " + s.user +
                                              " runs the job as root: only members of "
                                              "pgfleet_privileged may ask for it"};
  }
  if (std::regex_match(s.user, root_group)) {
    return std::pair{std::string("user"), "user " + s.user +
                                              " runs the job in the root group: only members of "
                                              "pgfleet_privileged may ask for it"};
  }
  if (std::regex_match(s.user, ids)) {
    for (size_t start = 0; start < s.user.size();) {
      size_t end = std::min(s.user.find(':', start), s.user.size());
      std::string id = s.user.substr(start, end - start);
      if (id.size() > 10 || std::stoll(id) >= kJobNamespaceIds) {
        return std::pair{std::string("user"),
                         "user " + s.user + ": ids of unprivileged jobs must be below " +
                             std::to_string(kJobNamespaceIds) +
                             " (their user namespace has that many); only members of "
                             "pgfleet_privileged may name host ids"};
      }
      start = end + 1;
    }
  }
  if (s.seccomp == "unconfined") {
    return std::pair{std::string("seccomp"),
                     std::string("seccomp unconfined runs the job without the default seccomp "
                                 "filter: only members of pgfleet_privileged may ask for it")};
  }
  if (s.network == "host") {
    return std::pair{std::string("network"),
                     std::string("network host shares the host's network: only members of "
                                 "pgfleet_privileged may ask for it (others get network none)")};
  }
  if (!s.rootfs.empty() && !std::regex_match(s.rootfs, name)) {
    return std::pair{std::string("rootfs"),
                     "rootfs " + s.rootfs +
                         " is a path: only members of pgfleet_privileged may give one; others "
                         "name a root filesystem under hostd's rootfs directory"};
  }
  for (const auto& [n, port] : s.ports) {
    if (port >= 1 && port < 1024) {
      return std::pair{std::string("ports"), "ports." + n + " asks for host port " +
                                                 std::to_string(port) +
                                                 ": ports below 1024 are for members of "
                                                 "pgfleet_privileged only"};
    }
  }
  return std::nullopt;
}

std::pair<std::string, std::string> ParseKeyValue(const std::string& field, const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw SpecError(field, field + " must be KEY=VALUE with a non-empty KEY (got \"" + kv + "\")");
  }
  return {kv.substr(0, eq), kv.substr(eq + 1)};
}

}  // namespace pgfleet::model
