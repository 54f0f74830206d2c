#include "core/daemon/flags.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "core/util/log.h"
#include "core/util/text.h"

namespace pgfleet::daemon {

namespace po = boost::program_options;

Flags::Flags(DaemonInfo info) : info_(std::move(info)), opts_(info_.caption) {
  opts_.add_options()("help,h", "show this help")(
      "db", po::value(&common_.db),
      "PostgreSQL connection string (else $PGFLEET_DB, else PG* variables)")(
      "id", po::value(&common_.id), info_.id_help.c_str())(
      "listen", po::value(&common_.listen)->default_value("127.0.0.1:0"),
      info_.listen_help.c_str())("token-file", po::value(&common_.token_file),
                                 "file holding the cluster token (required)")(
      "tls-cert", po::value(&common_.tls.cert),
      "serve HTTPS with this certificate (PEM), and present it to hosts that ask for one")(
      "tls-key", po::value(&common_.tls.key), "the private key (PEM) of --tls-cert")(
      "tls-ca", po::value(&common_.tls.ca),
      "CA certificate (PEM): trust only https hosts it signed, and with --tls-cert require "
      "clients to present a certificate it signed")(
      "log-level", po::value(&common_.log_level)->default_value("info"),
      "trace, debug, info, warn, error")(
      "config", po::value(&common_.config_file),
      "config file with the same option names (name = value lines; flags win); default "
      "/etc/pgfleet/<program>.conf ($PGFLEET_CONFIG_DIR/<program>.conf) when it exists");
}

int Flags::Usage(const std::string& message) const {
  std::cerr << info_.program << ": " << message << "\nusage: " << info_.usage << "\n";
  return 2;
}

namespace {

// The config file a daemon reads without --config, when it exists:
// /etc/pgfleet/<program>.conf ($PGFLEET_CONFIG_DIR instead of /etc/pgfleet).
std::string DefaultConfigFile(const std::string& program) {
  const char* dir = std::getenv("PGFLEET_CONFIG_DIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/etc/pgfleet") + "/" + program +
         ".conf";
}

// Stores the options of a config file into *vm, one line at a time, so an
// error names the file, the line and the option: `name = value` lines (the
// flags' names without "--"), blank lines and `#` comments. Values already
// in *vm (the command line's) win: po::store keeps the first value of an
// option.
void StoreConfigFile(const std::string& file, const po::options_description& opts,
                     po::variables_map* vm) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read --config " + file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = "--config " + file + " line " + std::to_string(n);
    std::string text = util::Trim(line);
    if (text.empty() || text[0] == '#') continue;
    const auto eq = text.find('=');
    if (eq == std::string::npos) {
      throw std::runtime_error(where + ": expected `name = value` (got \"" + text + "\")");
    }
    const std::string name = util::Trim(text.substr(0, eq));
    const std::string value = util::Trim(text.substr(eq + 1));
    if (name.empty() || name == "config" || name == "help" ||
        opts.find_nothrow(name, false) == nullptr) {
      throw std::runtime_error(where + ": unknown option \"" + name + "\"");
    }
    const std::vector<std::string> arg = {"--" + name + "=" + value};
    try {
      po::store(po::command_line_parser(arg).options(opts).run(), *vm);
    } catch (const po::error& e) {
      throw std::runtime_error(where + ": option \"" + name + "\": " + e.what());
    }
  }
}

}  // namespace

void Flags::Read(int argc, char** argv, po::variables_map* vm) {
  po::store(po::parse_command_line(argc, argv, opts_), *vm);
  if (vm->count("config")) {
    StoreConfigFile((*vm)["config"].as<std::string>(), opts_, vm);
  } else if (const std::string file = DefaultConfigFile(info_.program);
             ::access(file.c_str(), F_OK) == 0) {
    common_.config_file = file;
    StoreConfigFile(file, opts_, vm);
  }
  po::notify(*vm);
}

std::optional<int> Flags::Parse(int argc, char** argv,
                                const std::function<void(const po::variables_map&)>& validate) {
  po::variables_map vm;
  try {
    Read(argc, argv, &vm);
    if (vm.count("help")) {
      std::cout << opts_ << "\n";
      return 0;
    }
    if (validate) validate(vm);
    util::SetupLogging(info_.log_name, common_.log_level);
    try {
      common_.token = net::ReadTokenFile(common_.token_file);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("--token-file: ") + e.what());
    }
    net::CheckTlsFiles(common_.tls);
    net::SetClientTls(common_.tls);
    common_.dsn = db::ResolveDsn(common_.db);
    // A connection string libpq cannot parse is a usage error, not an outage
    // to retry forever (e.g. db = "host=..." quoted in a config file).
    if (std::string why = db::DsnProblem(common_.dsn); !why.empty()) {
      throw std::invalid_argument(
          "--db (or $PGFLEET_DB, or db in the config file) is not a "
          "connection string libpq can parse: " +
          why);
    }
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  return std::nullopt;
}

}  // namespace pgfleet::daemon
