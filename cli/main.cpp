// pgfleet: the command-line client. main() picks the command by its name and
// turns what it throws into an exit code (command.h). Each command is a thin
// layer over the statements in queries.h (and, for logs, the hosts' API).

#include <spdlog/spdlog.h>

#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <pqxx/pqxx>
#include <string>

#include "cli/command.h"
#include "core/db/sql_state.h"
#include "core/net/http.h"

namespace {

const char* kUsage =
    "usage: pgfleet COMMAND [options]\n"
    "commands:\n"
    "  migrate                          create or upgrade the schema\n"
    "  run [options] -- CMD ARG...      submit a job (prints its id; --wait streams output, exits "
    "with its code)\n"
    "  ps [--all] [--formation F]       list jobs\n"
    "  inspect JOB                      everything about a job, with its events\n"
    "  logs JOB [-f] [--tail N]         a job's output\n"
    "  fs JOB [PATH]                    list a directory or print a file of a job's sandbox\n"
    "  exec JOB [-i] -- CMD ARG...      run a command inside a running job\n"
    "  wait JOB... [--timeout D]        block until the jobs end; exit with the job's code\n"
    "  stop JOB                         cancel a job (stops it if running)\n"
    "  events [JOB] [-f]                job event history\n"
    "  formation create|update|status|history|revert|promote|scale|done|delete|list\n"
    "                                   manage formations, their versions and rollouts\n"
    "  plan --job JOB | plan [run's options] -- CMD\n"
    "                                   where a job would be placed, and why not elsewhere\n"
    "  hosts                            list hosts\n"
    "  endpoints [FORMATION] [--watch]  where running jobs listen (host:port, bridge address)\n"
    "  drain HOST                       no new work on HOST\n"
    "  host offline|online|remove HOST  take a host out, bring it back, or forget it\n"
    "  status                           cluster summary\n"
    "  quotas                           owners' quotas and what they use now\n"
    "  ui [--listen HOST:PORT]          the web dashboard (default 127.0.0.1:7780)\n"
    "every command takes --db DSN (else $PGFLEET_DB, else PG* variables); listings take --json.\n"
    "exit codes: 0 success, 1 failure, 2 usage error; run --wait and wait exit with the job's\n"
    "code, wait --timeout with 124\n";

// What a database error says to a user: its message, detail and hint, not
// the PL/pgSQL CONTEXT lines (where in our functions it was raised); and for
// a database pgfleet was never set up in, what to do about it.
std::string DatabaseError(const pqxx::sql_error& e) {
  std::string text = e.what();
  auto context = text.find("CONTEXT:");
  if (context != std::string::npos) text.erase(context);
  const std::string& state = e.sqlstate();
  if ((state == pgfleet::db::sqlstate::kUndefinedTable || state == pgfleet::db::sqlstate::kInvalidSchemaName ||
       state == pgfleet::db::sqlstate::kUndefinedFunction) &&
      text.find("pgfleet") != std::string::npos) {
    text += "this database has no pgfleet schema, or an older one: run `pgfleet migrate` first\n";
  }
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pgfleet::cli;
  spdlog::set_level(spdlog::level::warn);
  // A host that drops a TLS connection must not kill us with SIGPIPE (OpenSSL
  // writes without MSG_NOSIGNAL); the loops that print until stopped end when
  // stdout is closed instead.
  std::signal(SIGPIPE, SIG_IGN);
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "help")) {
    std::cout << kUsage;
    return argc < 2 ? kExitUsage : kExitOk;
  }
  static const std::map<std::string, int (*)(const std::vector<std::string>&)> commands = {
      {"migrate", CmdMigrate},     {"run", CmdRun},      {"ps", CmdPs},
      {"inspect", CmdInspect},     {"logs", CmdLogs},    {"stop", CmdStop},
      {"events", CmdEvents},       {"hosts", CmdHosts},  {"status", CmdStatus},
      {"drain", CmdDrain},         {"host", CmdHost},    {"formation", CmdFormation},
      {"wait", CmdWait},           {"fs", CmdFs},        {"exec", CmdExec},
      {"endpoints", CmdEndpoints}, {"quotas", CmdQuotas},
      {"plan", CmdPlan},         {"ui", CmdUi}};
  std::string name = argv[1];
  auto it = commands.find(name);
  if (it == commands.end()) {
    std::cerr << "pgfleet: unknown command \"" << name << "\"\n" << kUsage;
    return kExitUsage;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    // Hosts that serve HTTPS (--tls-cert): whom to trust, what to present.
    auto env = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v ? v : "");
    };
    pgfleet::net::TlsFiles tls{env("PGFLEET_TLS_CA"), env("PGFLEET_TLS_CERT"),
                               env("PGFLEET_TLS_KEY")};
    try {
      pgfleet::net::CheckTlsFiles(tls);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("$PGFLEET_TLS_CA/_CERT/_KEY: ") + e.what());
    }
    pgfleet::net::SetClientTls(tls);
    return it->second(args);
  } catch (const UsageError& e) {
    std::cerr << "pgfleet " << name << ": " << e.what() << "\n(see pgfleet " << name
              << " --help)\n";
    return kExitUsage;
  } catch (const pqxx::broken_connection& e) {
    std::cerr << "pgfleet " << name << ": cannot connect to the database: " << e.what();
    return kExitFailure;
  } catch (const pqxx::sql_error& e) {
    std::cerr << "pgfleet " << name << ": " << DatabaseError(e);
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "pgfleet " << name << ": " << e.what() << "\n";
    return kExitFailure;
  }
}
