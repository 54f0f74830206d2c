#pragma once
// Pieces every pgfleet CLI command shares: usage errors, the database and
// token options, aligned tables and --json output.

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

namespace pgfleet::cli {

namespace po = boost::program_options;

// Exit codes: 0 success, 1 failure, 2 usage error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// A bad flag, value or argument: printed with the command's usage line, exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Common {
  std::string db;
  std::string token_file;
  bool json = false;
};

// Adds --db, --token-file and (for listings) --json.
void AddCommonOptions(po::options_description& opts, Common& common, bool listing);

// Parses args (argv after the command name) into vm; unknown flags and bad
// values throw UsageError. Positional arguments go to `positional_name` (if set).
void ParseArgs(const std::vector<std::string>& args, const po::options_description& opts,
               po::variables_map& vm, const char* positional_name = nullptr,
               int max_positional = -1);

std::unique_ptr<pqxx::connection> ConnectDb(const Common& common);

// Token for hostd's API: --token-file, else $PGFLEET_TOKEN_FILE; empty when neither is set.
std::string TokenOrEmpty(const Common& common);

// Prints rows as an aligned table with a header.
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows);

// Runs a query whose single column is json (e.g. json_agg) and prints it pretty.
void PrintJson(const nlohmann::json& j);

int64_t ParseJobId(const std::string& s);

// Each command: args are the words after the command name.
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

}  // namespace pgfleet::cli
