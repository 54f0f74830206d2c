#include "core/daemon/flags.h"

#include <fstream>
#include <iostream>
#include <stdexcept>

#include "core/db/connection.h"
#include "core/net/http.h"
#include "core/util/log.h"

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
      "trace, debug, info, warn, error")("config", po::value(&common_.config_file),
                                         "config file with the same option names (name = value)");
}

int Flags::Usage(const std::string& message) const {
  std::cerr << info_.program << ": " << message << "\nusage: " << info_.usage << "\n";
  return 2;
}

void Flags::Read(int argc, char** argv, po::variables_map* vm) {
  po::store(po::parse_command_line(argc, argv, opts_), *vm);
  if (vm->count("config")) {
    const auto& file = (*vm)["config"].as<std::string>();
    std::ifstream f(file);
    if (!f) throw std::runtime_error("cannot read --config " + file);
    try {
      po::store(po::parse_config_file(f, opts_), *vm);
    } catch (const po::error& e) {
      throw std::runtime_error("--config " + file + ": " + e.what());
    }
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
