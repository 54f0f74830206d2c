#include "cli/start_flags.h"

#include <sstream>

#include "core/util/text.h"

namespace pgfleet::cli {

void AddStartOptions(Command& cmd, StartFlags* flags) {
  cmd.Options()("after", po::value(&flags->after)->composing(),
                "start only once these jobs succeeded: ID[,ID...] (repeatable; fails if one "
                "fails)")("at", po::value(&flags->at),
                          "start no earlier than this time (ISO 8601, or any time PostgreSQL "
                          "reads, e.g. '2026-12-24 18:00 Europe/Paris')")(
      "in", po::value(&flags->in), "start no earlier than this long from now (10s, 10m, 2h, 1d)")(
      "preemptible", po::value(&flags->preemptible),
      "true (the default) or false: whether a higher-priority job may stop it to make room");
}

std::vector<int64_t> ParseAfter(const std::vector<std::string>& values) {
  std::vector<int64_t> ids;
  for (const auto& value : values) {
    std::stringstream words(value);
    std::string word;
    bool any = false;
    while (std::getline(words, word, ',')) {
      word = util::Trim(word);
      long long id = 0;
      size_t used = 0;
      try {
        id = std::stoll(word, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != word.size() || id <= 0) {
        throw UsageError("--after must be job ids (positive integers) separated by commas (got \"" +
                         value + "\")");
      }
      ids.push_back(id);
      any = true;
    }
    if (!any) throw UsageError("--after must name at least one job id (got \"" + value + "\")");
  }
  return ids;
}

double ParseStartIn(const std::string& value) {
  double seconds = 0;
  try {
    seconds = util::ParseSeconds("--in", value);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (seconds > kMaxStartDelaySeconds) {
    throw UsageError("--in must be at most 365d (got \"" + value + "\")");
  }
  return seconds;
}

JobStart CheckStartFlags(const StartFlags& flags, pqxx::connection& conn) {
  JobStart rule;
  rule.after = ParseAfter(flags.after);
  if (!flags.preemptible.empty()) {
    if (flags.preemptible != "true" && flags.preemptible != "false") {
      throw UsageError("--preemptible must be true or false (got \"" + flags.preemptible + "\")");
    }
    rule.preemptible = flags.preemptible == "true";
  }
  if (!flags.at.empty() && !flags.in.empty()) {
    throw UsageError("--at and --in both say when the job starts: give one of them");
  }
  if (!flags.in.empty()) rule.in_seconds = ParseStartIn(flags.in);
  if (!flags.at.empty()) {
    StartTime t;
    try {
      pqxx::work tx(conn);
      t = ReadStartTime(tx, flags.at);
    } catch (const pqxx::data_exception&) {
      t = {};
    }
    if (t.text.empty() || !t.finite) {
      throw UsageError(
          "--at must be a time, ISO 8601 (2026-12-24T18:00:00Z) or any PostgreSQL "
          "reads as timestamptz ('2026-12-24 18:00 Europe/Paris'; got \"" +
          flags.at + "\")");
    }
    if (t.seconds_from_now > kMaxStartDelaySeconds) {
      throw UsageError("--at must be at most 365 days from now (got \"" + flags.at + "\", " +
                       t.text + ")");
    }
    rule.at = t.text;
  }
  return rule;
}

}  // namespace pgfleet::cli
