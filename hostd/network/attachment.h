#pragma once
// One attempt's place on a CNI network: set up (ADD) before the job's
// command runs, taken down (DEL) at every end of the attempt, by the shim
// normally and by hostd when the shim is gone (attempt/outcome.h
// FinalOutcome, also after a hostd restart). docs/networking.md.
//
// What DEL needs is saved in the attempt's directory (kAttachmentFile),
// which is root's, mode 0700, and never the job's (attempt_dir.h): the
// configuration used, the container ID, the pinned network namespace, the
// port mappings and ADD's result (DEL's prevResult, as libcni caches it).
// It is written before ADD, so an ADD cut short by a crash is undone too.
//
// The job's network namespace is pinned by a bind mount of
// /proc/<pid>/ns/net onto <data_dir>/netns/<container id> (as `ip netns add`
// does), so DEL always reaches the namespace ADD set up, after the job has
// died and whatever its pid became; it is unmounted once DEL succeeded.
//
// Container IDs: "pgfleet-<scope>-<job>-<attempt>", scope a hash of hostd's
// data dir (container.h CgroupScopeOf): unique on the machine, stable
// across hostd restarts. DEL is idempotent; a DEL that fails leaves the
// file for the next try.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hostd/network/cni_config.h"

namespace pgfleet::hostd::network {

inline constexpr const char* kAttachmentFile = "network.json";
inline constexpr const char* kNetnsDir = "netns";  // under hostd's data dir

// What hostd gives a shim for a bridge job.
struct NetworkOptions {
  nlohmann::json conflist;            // the parsed configuration list hostd checked
  std::vector<std::string> bin_dirs;  // --cni-bin-dir, then the fallbacks
  std::string netns_dir;              // <data_dir>/netns
};
nlohmann::json ToJson(const NetworkOptions& o);
NetworkOptions NetworkOptionsFromJson(const nlohmann::json& j);

struct Attachment {
  std::string container_id;
  std::string netns;  // the pinned namespace
  std::string ifname = "eth0";
  nlohmann::json conflist;
  std::vector<std::string> bin_dirs;
  std::map<std::string, int> ports;  // name -> host port (= container port)
  nlohmann::json result;             // ADD's final result; null before it
  // The first IPv4 (else IPv6) address of the result's interface in the
  // namespace, without its prefix length; "" when none.
  std::string address() const;
};
nlohmann::json ToJson(const Attachment& a);
// Throws std::exception when malformed.
Attachment AttachmentFromJson(const nlohmann::json& j);

// "pgfleet-<scope>-<job>-<attempt>".
std::string ContainerId(const std::string& scope, int64_t job_id, int attempt);

// Pins the network namespace of process `pid` at <netns_dir>/<container id>
// and sets up the attempt's network (ADD through every plugin, in order),
// saving the attachment in attempt_dir first. Returns it, with its result.
// Throws PluginError or ConfigError; what ADD set up is then taken down
// again before it throws.
Attachment Attach(const NetworkOptions& options, const std::string& attempt_dir,
                  const std::string& container_id, pid_t pid,
                  const std::map<std::string, int>& ports);

// CHECK through every plugin (what ADD set up is still there). Throws
// PluginError.
void Check(const Attachment& a);

// DEL through every plugin in reverse order, then unpins the namespace and
// removes the saved file. True when it is all gone (or there was nothing);
// false with *error when a plugin failed (the file stays for a retry).
bool Detach(const Attachment& a, const std::string& attempt_dir, std::string* error);
// The same for the attachment saved in attempt_dir, if any (hostd, when the
// shim is gone). Never throws.
bool DetachSaved(const std::string& attempt_dir, std::string* error);
// CHECK for the attachment saved in attempt_dir: true when there is none or
// every plugin finds it as ADD left it; false with *error. Never throws.
bool CheckSaved(const std::string& attempt_dir, std::string* error);
// Whether attempt_dir holds an attachment not yet taken down.
bool HasSavedAttachment(const std::string& attempt_dir);

}  // namespace pgfleet::hostd::network
