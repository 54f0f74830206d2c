// pgfleet events: the job event history, of one job or all; with -f, new
// events as they are written (polled every 500 ms).

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

// The first page is an aligned table with a header (even when empty); later
// pages (with -f) are lines in the same column order, without alignment.
// With --json, one JSON object per line.
void PrintEvents(const std::vector<EventRow>& events, bool first, bool as_json) {
  if (as_json) {
    for (const auto& e : events) std::cout << e.json << "\n";
    return;
  }
  std::vector<std::vector<std::string>> table;
  for (const auto& e : events) {
    table.push_back(
        {e.at, std::to_string(e.job_id), std::to_string(e.attempt), e.kind, e.host_id, e.detail});
  }
  if (first) {
    PrintTable({"AT", "JOB", "ATTEMPT", "KIND", "HOST", "DETAIL"}, table);
    return;
  }
  for (const auto& t : table) {
    std::cout << t[0] << "  " << t[1] << "  " << t[2] << "  " << t[3] << "  " << t[4] << "  "
              << t[5] << "\n";
  }
}

}  // namespace

int CmdEvents(const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  bool follow = false;
  int limit = 100;
  Command cmd("pgfleet events [JOB] [-f]", kListing);
  cmd.Options()("follow,f", po::bool_switch(&follow), "keep printing new events")(
      "limit", po::value(&limit), "how many past events (default 100)");
  cmd.Positional("job", &pos);
  if (!cmd.Parse(args)) return kExitOk;
  if (pos.size() > 1) throw UsageError("expected at most one JOB");
  if (limit <= 0) throw UsageError("--limit must be > 0 (got " + std::to_string(limit) + ")");
  int64_t job = pos.empty() ? 0 : ParseJobId(pos[0]);
  auto conn = cmd.Connect();
  int64_t last = 0;
  bool first = true;
  while (true) {
    pqxx::work tx(*conn);
    auto events = ListEvents(tx, job, last, first ? limit : kFollowBatch);
    tx.commit();
    PrintEvents(events, first, cmd.json());
    std::cout.flush();
    if (!events.empty()) last = events.back().id;
    first = false;
    if (!follow) return kExitOk;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace pgfleet::cli
