// POST /v1/jobs: a scheduler's dispatch of a batch of attempts to this host,
// each with its signed ticket (routes::TakeTicket); each starts or fails on
// its own, and the answer says how each went.

#include <spdlog/spdlog.h>

#include <atomic>
#include <functional>
#include <thread>

#include "core/hostapi/hostapi.h"
#include "core/model/job_spec.h"
#include "core/model/json_limits.h"
#include "hostd/api/api_routes.h"

namespace pgfleet::hostd::routes {
namespace {

using nlohmann::json;

// Starts of one dispatched batch run this many at a time.
constexpr size_t kParallelStarts = 4;

using StartItem = hostapi::IncomingJob;

// The whole batch first (hostapi::DecodeDispatch): a body that is not one
// starts nothing; a bad spec refuses only its own item.
std::vector<StartItem> ParseStartBatch(const std::string& body) {
  return hostapi::DecodeDispatch(body);
}

const char* StartStatus(Supervisor::StartResult r) {
  switch (r) {
    case Supervisor::StartResult::kStarted:
      return "started";
    case Supervisor::StartResult::kAlready:
      return "already";
    case Supervisor::StartResult::kFailed:
      return "failed";
    case Supervisor::StartResult::kPreviousLife:
      return "previous_life";
    case Supervisor::StartResult::kFenced:
      return "fenced";
  }
  return "failed";
}

json StartOne(const Api& api, const StartItem& item) {
  if (!item.refused.empty()) {
    // Refused on its own: it fails (start_failed) and the others start.
    api.metrics.Add("pgfleet_host_jobs_refused_total", 1);
    api.agent.Enqueue(model::Report::StartFailed(item.job, item.attempt, item.refused));
    return {{"job", item.job},
            {"attempt", item.attempt},
            {"status", "failed"},
            {"error", item.refused}};
  }
  std::string err;
  api.supervisor.ForgetOtherJob(item.job, item.attempt, item.spec.uid);
  auto r = api.supervisor.Start(item.job, item.attempt, item.spec, &err);
  if (r == Supervisor::StartResult::kPreviousLife) {
    api.agent.Enqueue(NoTraceOfAttempt(item.job, item.attempt, item.spec.uid));
  }
  return {{"job", item.job}, {"attempt", item.attempt}, {"status", StartStatus(r)}, {"error", err}};
}

}  // namespace

// POST /v1/jobs
void HandleStartJobs(const Api& api, const httplib::Request& req, httplib::Response& res) {
  std::vector<StartItem> items;
  try {
    items = ParseStartBatch(req.body);
  } catch (const model::SpecError& e) {
    api.metrics.Add("pgfleet_host_api_bad_requests_total", 1);
    net::ErrorResponse(res, 400, e.what());
    return;
  }
  // Every job's ticket first: one that is forged, expired, for another host
  // or job, or used before starts nothing of the batch (and reports nothing).
  for (size_t i = 0; i < items.size(); ++i) {
    std::string why;
    auto t = TakeTicket(api, items[i].ticket, net::TicketKind::kDispatch, items[i].job,
                        items[i].attempt, &why);
    if (!t) {
      // Debug only: forged requests must not flood the log (the metric counts them).
      spdlog::debug("host={} dispatch refused: jobs[{}].ticket: {}", api.agent.Config().id, i, why);
      net::ErrorResponse(res, 403, "jobs[" + std::to_string(i) + "].ticket: " + why);
      return;
    }
    // Privileged only if the scheduler's signature says so, whatever the spec claims.
    items[i].spec.privileged = t->privileged;
  }
  // A self-fenced host refuses the whole batch as a dispatch failure: the
  // scheduler puts the jobs back to pending, unharmed, and suspends this host
  // for a while. Taken and reported as lost instead, each would count as a
  // host loss, and a host whose fence lifts a moment after its heartbeat is
  // back (the watchdog's tick) used to burn all three of a job's losses on
  // the spot.
  std::string fence;
  if (api.supervisor.Fenced(&fence)) {
    api.metrics.Add("pgfleet_host_dispatches_refused_fenced_total", 1);
    net::ErrorResponse(res, 503, "host is self-fenced (" + fence + "): not starting new work");
    return;
  }
  // Each start waits for its shim's answer (a few ms, mostly the kernel
  // setting up the job), so a batch is started a few at a time (sim starts
  // take microseconds: one at a time).
  std::vector<json> results(items.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < items.size();) results[i] = StartOne(api, items[i]);
  };
  std::vector<std::thread> helpers;
  size_t workers = api.supervisor.RunsProcesses() ? kParallelStarts : 1;
  for (size_t w = 1; w < std::min(items.size(), workers); ++w) helpers.emplace_back(work);
  work();
  for (auto& t : helpers) t.join();
  api.metrics.Add("pgfleet_host_jobs_dispatched_total", static_cast<double>(items.size()));
  res.set_content(json{{"results", json(results)}}.dump(), "application/json");
}

}  // namespace pgfleet::hostd::routes
