#pragma once
// The command line every pgfleet daemon shares: the flags both take (--db,
// --id, --listen, --token-file, --log-level, --config FILE, --help), parsing
// them (and a config file with the same option names, Boost.Program_options'
// "name = value" format; the command line wins), logging setup, and usage
// errors that name the flag or file and exit 2.
//
// Who calls what: a daemon's main() makes one Flags, adds its own options to
// options(), calls Parse once and returns the code Parse gives it, if any.
// Flags binds the options to its own members: it is neither copied nor moved.

#include <boost/program_options.hpp>
#include <functional>
#include <optional>
#include <string>

#include "core/net/http.h"

namespace pgfleet::daemon {

// How a daemon names itself and words its common flags.
struct DaemonInfo {
  std::string program;      // "pgfleet-hostd": prefix of every usage error
  std::string log_name;     // "hostd": the logger's name
  std::string usage;        // the synopsis printed after "usage: "
  std::string caption;      // the title of --help
  std::string id_help;      // what --id means for this daemon
  std::string listen_help;  // what --listen serves
};

// The shared flags' values once Parse succeeded.
struct CommonFlags {
  std::string db;           // --db as given (may be empty)
  std::string id;           // --id (may be empty: the daemon decides)
  std::string listen;       // --listen HOST:PORT (default 127.0.0.1:0)
  std::string token_file;   // --token-file
  std::string log_level;    // --log-level (default info)
  std::string config_file;  // --config (may be empty)
  std::string dsn;          // db::ResolveDsn(db)
  std::string token;        // the cluster token read from --token-file
  net::TlsFiles tls;        // --tls-ca, --tls-cert, --tls-key (all optional)
};

class Flags {
 public:
  explicit Flags(DaemonInfo info);
  Flags(const Flags&) = delete;
  Flags& operator=(const Flags&) = delete;

  // Add the daemon's own options here before Parse.
  boost::program_options::options_description& options() { return opts_; }
  const CommonFlags& common() const { return common_; }
  CommonFlags& common() { return common_; }
  const DaemonInfo& info() const { return info_; }

  // Parses argv, then --config FILE; prints --help; then runs validate (which
  // throws a std::exception whose message names the flag, the value and the
  // rule), sets up logging, reads the token file and resolves the DSN.
  // Returns std::nullopt when the daemon should go on, else the exit code for
  // main to return: 0 after --help, 2 after a usage error (already printed).
  std::optional<int> Parse(
      int argc, char** argv,
      const std::function<void(const boost::program_options::variables_map&)>& validate = {});

  // Prints "<program>: <message>" and the usage line to stderr; returns 2.
  int Usage(const std::string& message) const;

 private:
  void Read(int argc, char** argv, boost::program_options::variables_map* vm);

  DaemonInfo info_;
  CommonFlags common_;
  boost::program_options::options_description opts_;
};

}  // namespace pgfleet::daemon
