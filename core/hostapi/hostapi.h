#pragma once
// hostd's HTTP contract, in one place: its paths (the routes hostd serves and
// the URLs schedulerd and the CLI call), and the dispatch body a scheduler
// posts to start jobs, encoded by schedulerd and decoded by hostd. Nothing
// else spells a path or builds or parses that body. docs/security.md says
// who may call what (tickets, the cluster token).
//
// The dispatch body: {"jobs":[{"job":J,"attempt":A,"spec":{...},"uid":"U",
// "ticket":"T"},...]}; uid is optional (older schedulers), the ticket is
// required (hostd refuses a batch with an item without one).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/job_spec.h"

namespace pgfleet::hostapi {

// --- paths (callers add the endpoint's prefix: net::MakeEndpoint) ---

inline constexpr const char* kJobsPath = "/v1/jobs";  // POST: start (dispatch); GET: list
std::string JobPath(int64_t job);                      // GET: one job
// POST: stop the attempt (SIGTERM, grace, SIGKILL); force: SIGKILL at once.
std::string StopPath(int64_t job, int attempt, bool force);
// GET: its output; the caller appends "&follow=1", "&offset=N", "&tail=N".
std::string LogsPath(int64_t job, int attempt);
// GET: a file or directory of the job (attempt 0: its latest); path unencoded.
std::string FsPath(int64_t job, const std::string& path, int attempt);
// POST: run a command in the job; the caller appends its query parameters
// ("attempt=N&", "stdin=stream&", "tty=1&", "arg=..."), each ending in '&'.
std::string ExecPath(int64_t job);
// POST: the standard input of an exec session.
std::string ExecStdinPath(int64_t job);
// The routes hostd serves, as httplib patterns (the job id is the first match).
inline constexpr const char* kJobRoute = R"(/v1/jobs/([^/]+))";
inline constexpr const char* kStopRoute = R"(/v1/jobs/([^/]+)/stop)";
inline constexpr const char* kLogsRoute = R"(/v1/jobs/([^/]+)/logs)";
inline constexpr const char* kFsRoute = R"(/v1/jobs/([^/]+)/fs)";
inline constexpr const char* kExecRoute = R"(/v1/jobs/([^/]+)/exec)";
inline constexpr const char* kExecStdinRoute = R"(/v1/jobs/([^/]+)/exec/stdin)";

// Percent-encodes s for a query value (RFC 3986 unreserved kept).
std::string UrlEncode(std::string_view s);

// --- the dispatch body ---

// One job as a scheduler sends it. spec_json is the spec as JSON text
// (pgfleet.job_spec_json); it must outlive the call that encodes it.
struct OutgoingJob {
  int64_t job = 0;
  int attempt = 0;
  std::string_view spec_json;
  std::string uid;     // "" = none sent
  std::string ticket;  // "" = none sent (the host refuses the job)
};

// The bodies that carry jobs, in order, each at most max_bytes unless one
// job alone is larger (it goes alone); *first receives the index of each
// body's first job.
std::vector<std::string> EncodeDispatch(const std::vector<OutgoingJob>& jobs, size_t max_bytes,
                                        std::vector<size_t>* first);

// One job as hostd receives it. A spec that breaks the spec rules refuses
// only its own job: `refused` says why (and `spec` is unset); one job's spec
// never costs the batch's others their start.
struct IncomingJob {
  int64_t job = 0;
  int attempt = 0;
  model::JobSpec spec;  // spec.uid is the item's uid
  std::string refused;
  std::string ticket;
};

// The batch, or model::SpecError naming the field (jobs[2].attempt, ...)
// when the body is not one: not bounded JSON, no jobs array, an item without
// a job id > 0, an attempt in 1..2^31-1, a spec, a ticket, or with a uid that
// is not a string of at most 64 characters. Such a batch starts nothing.
std::vector<IncomingJob> DecodeDispatch(const std::string& body);

}  // namespace pgfleet::hostapi
