// pgfleet events: the job event history, of one job or all; with -f, new
// events as they are written (polled every 500 ms), in the same columns.

#include <algorithm>
#include <chrono>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "cli/output.h"
#include "cli/queries.h"

namespace pgfleet::cli {
namespace {

// How many events one poll of `events -f` reads after the first page.
constexpr int kFollowBatch = 10000;

// Column widths every page starts from: with -f, later pages are aligned
// with the first (a wider cell widens its column from then on).
std::vector<size_t> g_widths = {23, 6, 7, 12, 8};

// Prints rows aligned to g_widths, widening them as needed; the last column
// (the detail) is not padded.
void PrintAligned(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> shown;
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& c : row) cells.push_back(Printable(c));
    shown.push_back(std::move(cells));
  }
  for (const auto& row : shown) {
    for (size_t i = 0; i + 1 < row.size(); ++i) g_widths[i] = std::max(g_widths[i], row[i].size());
  }
  for (const auto& row : shown) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(g_widths[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// A page of events: a table (with a header on the first page), or with
// --jsonl one JSON object per line.
void PrintEvents(const std::vector<EventRow>& events, bool first, bool jsonl) {
  if (jsonl) {
    for (const auto& e : events) std::cout << e.json << "\n";
    return;
  }
  std::vector<std::vector<std::string>> rows;
  if (first) rows.push_back({"AT", "JOB", "ATTEMPT", "KIND", "HOST", "DETAIL"});
  for (const auto& e : events) {
    rows.push_back(
        {e.at, std::to_string(e.job_id), std::to_string(e.attempt), e.kind, e.host_id, e.detail});
  }
  PrintAligned(rows);
}

}  // namespace

int CmdEvents(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  bool follow = false;
  int limit = 100;
  bool jsonl = false;
  Command cmd("pgfleet events [JOB] [-f] [--limit N]", kListing);
  cmd.Options()("follow,f", po::bool_switch(&follow), "keep printing new events")(
      "limit", po::value(&limit), "how many past events (default 100)")(
      "jsonl", po::bool_switch(&jsonl), "one JSON object per line (works with -f)");
  cmd.Positional("job", &pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() > 1) throw UsageError("expected at most one JOB");
  if (limit <= 0) throw UsageError("--limit must be > 0 (got " + std::to_string(limit) + ")");
  if (cmd.json() && (follow || jsonl)) {
    throw UsageError("--json prints one document and cannot follow: use --jsonl with -f");
  }
  int64_t job = pos.empty() ? 0 : ParseJobId(pos[0]);
  auto conn = cmd.Connect();
  if (cmd.json()) {
    pqxx::work tx(*conn);
    auto events = ListEvents(tx, job, 0, limit);
    tx.commit();
    nlohmann::json out = nlohmann::json::array();
    for (const auto& e : events) out.push_back(nlohmann::json::parse(e.json));
    PrintJson(out);
    return kExitOk;
  }
  int64_t last = 0;
  bool first = true;
  while (true) {
    pqxx::work tx(*conn);
    auto events = ListEvents(tx, job, last, first ? limit : kFollowBatch);
    tx.commit();
    PrintEvents(events, first, jsonl);
    std::cout.flush();
    if (!std::cout) return kExitOk;  // the reader went away (e.g. `| head`)
    if (!events.empty()) last = events.back().id;
    first = false;
    if (!follow) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace pgfleet::cli
