#pragma once
// What every pgfleet CLI command shares before and around its own work: the
// exit codes, usage errors, and the prologue (its options plus --db,
// --token-file, --help and, for listings, --json; parsing; the connection).
//
// A command is a function from the words after its name to an exit code:
//
//   int CmdPs(const std::vector<std::string>& args) {
//     Command cmd("pgfleet ps [--all]", kListing);
//     cmd.Options()("all,a", po::bool_switch(&all), "include finished jobs");
//     if (!cmd.Parse(args)) return kExitOk;  // --help was printed
//     auto conn = cmd.Connect();
//     ...
//
// A command throws UsageError for a bad flag, value or argument; main() prints
// it with a pointer to --help and exits 2. Database and other failures are
// exceptions too, printed by main() with exit 1. Commands write their results
// to stdout and warnings to stderr.

#include <boost/program_options.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/model/job_spec.h"

namespace pgfleet::cli {

namespace po = boost::program_options;

// Exit codes: 0 success, 1 failure, 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A bad flag, value or argument: printed with the command's name, exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether a command prints a listing (and so takes --json).
enum class Output { kText, kListing };
inline constexpr Output kText = Output::kText;
inline constexpr Output kListing = Output::kListing;

// One command's options and the steps every command takes before its work.
// Not copyable; lives for the command's run.
class Command {
 public:
  // `usage` heads the --help text ("pgfleet logs JOB [-f] ...").
  Command(const std::string& usage, Output output);
  Command(const Command&) = delete;
  Command& operator=(const Command&) = delete;

  // Adds the command's own options; --help lists them in the order added,
  // before the common ones.
  po::options_description_easy_init Options() { return opts_.add_options(); }

  // Collects the positional words into *out (the usage line names them;
  // --help lists no option for them). At most one per command.
  void Positional(const char* name, std::vector<std::string>* out);

  // The command reads job output from hosts' APIs: it takes --token-file.
  void ReadsHostLogs() { reads_host_logs_ = true; }

  // Parses args (the words after the command name). Unknown flags and bad
  // values throw UsageError. Returns false when --help was given: the help has
  // been printed and the command returns kExitOk without doing anything.
  [[nodiscard]] bool Parse(const std::vector<std::string>& args);

  // True when the option was given on the command line (after Parse).
  bool Given(const char* option) const { return vm_.count(option) > 0; }
  // The first option given other than `except` and the common ones ("" when
  // none): for options that exclude each other's kind (plan --job).
  std::string GivenOtherThan(const std::vector<std::string>& except) const;

  // --json was given (listings only).
  bool json() const { return json_; }
  // The --db value as given ("" when not given).
  const std::string& DbFlag() const { return db_; }

  // Connects to --db, else $PGFLEET_DB, else libpq's PG* variables, with the
  // CLI's statements (queries.h) defined. Throws pqxx::broken_connection.
  std::unique_ptr<pqxx::connection> Connect() const;

  // The cluster token for hosts' APIs: --token-file, else $PGFLEET_TOKEN_FILE
  // (read by net::ReadTokenFile, which throws for a missing or empty file);
  // "" when neither is set.
  std::string TokenOrEmpty() const;

 private:
  po::options_description opts_;
  po::options_description hidden_;  // the positional words' option
  Output output_;
  bool reads_host_logs_ = false;
  const char* positional_ = nullptr;
  po::variables_map vm_;
  std::string db_;
  std::string token_file_;
  bool json_ = false;
};

// Splits args at the first "--": the words before it are options, the words
// after it a command line that is never parsed as options.
std::pair<std::vector<std::string>, std::vector<std::string>> SplitAtDoubleDash(
    const std::vector<std::string>& args);

// The --health-* flags as given: one of --health-cmd, --health-http,
// --health-tcp makes the check; the others tune it (model/health_check.h).
struct HealthFlags {
  std::string cmd;   // "test -f /ready" (split at spaces) or a JSON array of strings
  std::string http;  // PORT[/PATH]
  int tcp = 0;
  std::optional<int> interval, timeout, threshold, grace;
};

// Adds the --env and --constraint KEY=VALUE words, the --port NAME=PORT
// words and the health check to *spec, then checks every rule of the spec; a
// bad word or a broken rule is a UsageError.
void CompleteSpec(const std::vector<std::string>& envs, const std::vector<std::string>& constraints,
                  const std::vector<std::string>& ports, const HealthFlags& health,
                  model::JobSpec* spec);

// The flags that say how a job runs (cpu, memory, env, constraint, priority,
// rootfs, user, network, pids-max, cpu-hard-limit, stop-grace, health-*, file),
// shared by `run` and `formation create` (a formation's template is a whole
// job). --env, --constraint and --port words go to *envs, *constraints and
// *ports, the health flags to *health (CompleteSpec).
void AddJobTemplateOptions(Command& cmd, model::JobSpec* spec, std::vector<std::string>* envs,
                           std::vector<std::string>* constraints, std::vector<std::string>* ports,
                           HealthFlags* health);

// A JOB argument; throws UsageError unless it is a positive integer.
int64_t ParseJobId(const std::string& s);

// The commands; args are the words after the command name.
int CmdMigrate(const std::vector<std::string>& args);
int CmdRun(const std::vector<std::string>& args);
int CmdPs(const std::vector<std::string>& args);
int CmdInspect(const std::vector<std::string>& args);
int CmdLogs(const std::vector<std::string>& args);
int CmdStop(const std::vector<std::string>& args);
int CmdEvents(const std::vector<std::string>& args);
int CmdHosts(const std::vector<std::string>& args);
int CmdStatus(const std::vector<std::string>& args);
int CmdDrain(const std::vector<std::string>& args);
int CmdHost(const std::vector<std::string>& args);
int CmdFormation(const std::vector<std::string>& args);
int CmdWait(const std::vector<std::string>& args);
int CmdFs(const std::vector<std::string>& args);
int CmdExec(const std::vector<std::string>& args);
int CmdEndpoints(const std::vector<std::string>& args);
int CmdQuotas(const std::vector<std::string>& args);
int CmdPlan(const std::vector<std::string>& args);
int CmdUi(const std::vector<std::string>& args);  // cli/ui/ui.cpp

}  // namespace pgfleet::cli
