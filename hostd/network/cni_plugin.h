#pragma once
// Running one CNI plugin as the CNI spec 1.0 says ("Execution protocol"):
// the plugin's configuration on stdin, the CNI_* variables as its whole
// environment (and a fixed PATH for the tools plugins run: iptables, ip),
// its result or its error as JSON on stdout. No shell is involved.
//
// What must hold: a plugin that hangs is killed at its deadline; what it
// prints is bounded; its error ({"code", "msg", "details"}) becomes a
// PluginError naming the plugin, the command and the message.

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace pgfleet::hostd::network {

class PluginError : public std::runtime_error {
 public:
  PluginError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  // The CNI error code (spec: 1-99 well-known, 100+ plugin's own); 0 when
  // the plugin failed without one (could not run, timed out, bad output).
  int code() const { return code_; }

 private:
  int code_;
};

struct PluginCall {
  std::string command;       // CNI_COMMAND: ADD, DEL, CHECK or VERSION
  std::string container_id;  // CNI_CONTAINERID
  std::string netns;         // CNI_NETNS (may be "" for DEL)
  std::string ifname = "eth0";
  std::string path;  // CNI_PATH: the plugin directories, ':'-separated
  std::string args;  // CNI_ARGS
};

inline constexpr std::chrono::milliseconds kPluginTimeout{30000};

// Runs the plugin at `program` with `config` on stdin; returns what it
// printed as JSON (null when it printed nothing, as DEL may). Throws
// PluginError.
nlohmann::json RunPlugin(const std::string& program, const PluginCall& call,
                         const nlohmann::json& config,
                         std::chrono::milliseconds timeout = kPluginTimeout);

}  // namespace pgfleet::hostd::network
