#pragma once
// A job's output for the dashboard's job page: read from the host that ran
// the attempt (hostd's GET /v1/jobs/{id}/logs, non-following, the last
// lines), with a log ticket the database mints for the dashboard's login
// (pgfleet.log_ticket: the job's owner and operators get one, readers not);
// else the last 4 KiB the database keeps of the latest attempt.

#include <cstdint>
#include <string>

#include "cli/ui/ui_store.h"

namespace pgfleet::cli::ui {

// At most this much of a log is sent to a page.
inline constexpr size_t kMaxLogBytes = 1 << 20;

// {"attempt": N, "source": "host" | "database" | "none", "text": ..., "note": why not the host}
// for attempt `attempt` of the job (0: its latest); "" when the job is not
// visible. *bad_attempt is set when the job has no such attempt.
std::string JobLogJson(UiStore& store, int64_t id, int attempt, int tail, bool* bad_attempt);

}  // namespace pgfleet::cli::ui
