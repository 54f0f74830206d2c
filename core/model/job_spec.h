#pragma once
// The job model shared by the CLI, the scheduler and hostd: what one job asks
// for, how it travels as JSON (hostd API, pgfleet.jobs rows), and its rules.
// The same rules are enforced by the database (migrations/0001_init.sql); these
// give the same messages earlier, before anything is written.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/model/health_check.h"
#include "core/model/job_files.h"

namespace pgfleet::model {

// A rule broken by one field. what() reads "<field> <rule> (got <value>)".
class SpecError : public std::invalid_argument {
 public:
  SpecError(std::string field, const std::string& message)
      : std::invalid_argument(message), field_(std::move(field)) {}
  const std::string& field() const { return field_; }

 private:
  std::string field_;
};

inline constexpr int kDefaultCpu = 100;      // millicores
inline constexpr int kDefaultMemory = 64;    // MiB
inline constexpr int kDefaultPriority = 50;  // 0..100
inline constexpr int kDefaultPidsMax = 1024;
inline constexpr int kDefaultStopGraceSeconds = 10;
// A job's output files (hostd/output/output_log.h) when neither its spec nor the
// host says otherwise, and the bounds of both settings.
inline constexpr int kDefaultLogMaxFiles = 5;
inline constexpr int kDefaultLogMaxFileMb = 20;
inline constexpr int kMinLogMaxFiles = 2, kMaxLogMaxFiles = 100;
inline constexpr int kMinLogMaxFileMb = 1, kMaxLogMaxFileMb = 1024;

struct JobSpec {
  std::vector<std::string> command;  // argv; never passed to a shell; non-empty
  std::map<std::string, std::string> env;
  int cpu = kDefaultCpu;                           // millicores, > 0
  int memory = kDefaultMemory;                     // MiB, > 0
  std::map<std::string, std::string> constraints;  // label -> value, all must match
  int priority = kDefaultPriority;
  int max_attempts = 1;
  std::string formation = "default";

  // Isolation options, used by the container driver.
  std::string rootfs;  // directory, or a name under hostd's data dir; empty = host fs read-only
  std::string user;    // user to run as; empty = the driver's default
  // "host" (privileged), "none" (own namespace, loopback only) or "bridge"
  // (own namespace on the host's CNI bridge: hostd/network/).
  std::string network = "host";
  int pids_max = kDefaultPidsMax;
  // MiB of the job's writable work dir, a filesystem of its own (container
  // driver); 0 = no limit. 0..kMaxDiskMib.
  int disk = 0;
  // "default" (the container driver's seccomp filter) or "unconfined" (a
  // privileged feature: PrivilegeProblem).
  std::string seccomp = "default";
  bool cpu_hard_limit = false;  // also set a CFS quota of `cpu` millicores
  int stop_grace_seconds = kDefaultStopGraceSeconds;
  // Output kept: at most log_max_files files of log_max_file_mb MiB each
  // (the newest output wins); 0 = the host's default.
  int log_max_files = 0;
  int log_max_file_mb = 0;
  // The replica's health check, run by hostd (health_check.h); none when unset.
  std::optional<HealthCheck> health_check;
  // Named ports (jobs.ports, ValidatePorts): as submitted, 0 = any free port
  // of the host's range; in the spec a host is sent, the host ports the
  // attempt was given (jobs.host_ports), which the job listens on
  // (PGFLEET_PORT_<NAME>, JobPortEnv).
  std::map<std::string, int> ports;
  // Files hostd writes into the work dir before the job starts (job_files.h).
  JobFiles files;

  // Set by the database (jobs.privileged): the submitter was a member of
  // pgfleet_privileged, so the privileged features below may be used.
  bool privileged = false;

  // Not part of the spec's JSON: the job's uid (jobs.uid), from the dispatch
  // item or the database, "" when unknown. The host keys what it keeps of an
  // attempt by it (hostd/attempt/attempt_dir.h kUidFile).
  std::string uid;
};

// Why a job's user cannot be one (pgfleet.spec_problem's same rule): it must
// be empty, a name, or uid[:gid] in decimal of at most kMaxJobUserId each.
std::optional<std::string> UserProblem(const std::string& user);

// The privileged features a spec asks for, the same rules as the database's
// pgfleet.privilege_problem: user root (uid 0, or gid 0), network host, a rootfs
// that is a path rather than a name. Returns {field, message} for the first,
// or nullopt. Only privileged specs may ask for them (docs/security.md).
std::optional<std::pair<std::string, std::string>> PrivilegeProblem(const JobSpec& s);

// Parses and validates a spec object. Missing fields take their defaults;
// unknown fields are rejected (a typo must not silently change nothing).
// Throws SpecError naming the first bad field.
JobSpec ParseJobSpec(const nlohmann::json& j);

// Checks every rule; throws SpecError for the first one broken.
void Validate(const JobSpec& s);

nlohmann::json ToJson(const JobSpec& s);

inline constexpr int kMaxPorts = 32;
// The rules of pgfleet.spec_ports: at most kMaxPorts names matching
// ^[a-z][a-z0-9_]{0,31}$, each 0..65535, no number but 0 twice. Throws
// SpecError("ports", ...) naming the port.
void ValidatePorts(const std::map<std::string, int>& ports);

// The environment a job's given ports make: PGFLEET_PORT_<NAME>=port and
// PGFLEET_ADDR_<NAME>=<host_address>:port (NAME upper-cased), so the job
// knows what to listen on and what to advertise.
std::map<std::string, std::string> JobPortEnv(const std::map<std::string, int>& ports,
                                              const std::string& host_address);

// Parses "key=value" as used by --env, --constraint and --label.
// Throws SpecError(field, ...) when there is no '=' or the key is empty.
std::pair<std::string, std::string> ParseKeyValue(const std::string& field, const std::string& kv);

}  // namespace pgfleet::model
