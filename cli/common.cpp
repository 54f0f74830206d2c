#include "cli/common.h"

#include <cstdlib>
#include <iostream>

#include "core/db/connection.h"

namespace pgfleet::cli {

void AddCommonOptions(po::options_description& opts, Common& common, bool listing) {
  opts.add_options()("db", po::value(&common.db),
                     "PostgreSQL connection string (else $PGFLEET_DB, else PG* variables)")(
      "token-file", po::value(&common.token_file),
      "cluster token, to read logs from hosts (else $PGFLEET_TOKEN_FILE)")("help,h",
                                                                           "show this help");
  if (listing)
    opts.add_options()("json", po::bool_switch(&common.json), "print JSON instead of a table");
}

void ParseArgs(const std::vector<std::string>& args, const po::options_description& opts,
               po::variables_map& vm, const char* positional_name, int max_positional) {
  try {
    po::positional_options_description pos;
    if (positional_name) pos.add(positional_name, max_positional);
    auto parsed = po::command_line_parser(args).options(opts).positional(pos).run();
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
}

std::unique_ptr<pqxx::connection> ConnectDb(const Common& common) {
  return db::Connect(db::ResolveDsn(common.db));
}

std::string TokenOrEmpty(const Common& common) {
  std::string path = common.token_file;
  if (path.empty()) {
    if (const char* env = std::getenv("PGFLEET_TOKEN_FILE")) path = env;
  }
  if (path.empty()) return "";
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) throw std::runtime_error("cannot read token file " + path);
  char buf[512];
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  std::string t(buf, n);
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ' || t.back() == '\r')) t.pop_back();
  return t;
}

void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(header.size());
  for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(w[i] - r[i].size() + 2, ' ');
    }
    std::cout << out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

void PrintJson(const nlohmann::json& j) {
  std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int64_t ParseJobId(const std::string& s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used == s.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw UsageError("JOB must be a positive integer job id (got \"" + s + "\")");
}

}  // namespace pgfleet::cli
