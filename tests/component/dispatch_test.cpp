// What the dispatcher sends a host (schedulerd/dispatch.h, DispatchBodies)
// and what it makes of the answer (DeliveryOf), without a host or database.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/hostapi/hostapi.h"
#include "core/net/ticket.h"
#include "schedulerd/dispatch.h"

namespace pgfleet::schedulerd {
namespace {

HostTarget TargetOf(int jobs, size_t spec_bytes, const std::string& key) {
  HostTarget t;
  t.api_url = "http://127.0.0.1:1";
  t.ticket_key = key;
  for (int i = 1; i <= jobs; ++i) {
    std::string spec = R"({"command":["echo",")" + std::string(spec_bytes, 'x') + R"("]})";
    t.jobs.push_back({i, 2, spec, "uid-" + std::to_string(i), i % 2 == 0});
  }
  return t;
}

TEST(DispatchBodies, EveryJobOnceInOrderWithATicketForThisHostAndAttempt) {
  const std::string key = net::NewTicketKey();
  auto target = TargetOf(5, 10, key);
  std::vector<size_t> first;
  auto bodies = DispatchBodies("h1", target, 1000, kMaxDispatchBytes, &first);
  ASSERT_EQ(1u, bodies.size());
  EXPECT_EQ(std::vector<size_t>{0}, first);
  auto jobs = hostapi::DecodeDispatch(bodies[0]);
  ASSERT_EQ(5u, jobs.size());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(i + 1, jobs[i].job);
    EXPECT_EQ(2, jobs[i].attempt);
    EXPECT_EQ("", jobs[i].refused);
    EXPECT_EQ("uid-" + std::to_string(i + 1), jobs[i].spec.uid);
    std::string why;
    auto t = net::VerifyTicket(jobs[i].ticket, key, net::TicketKind::kDispatch, "h1", 1001, &why);
    ASSERT_TRUE(t.has_value()) << why;
    EXPECT_EQ(i + 1, t->job);
    EXPECT_EQ(2, t->attempt);
    EXPECT_EQ((i + 1) % 2 == 0, t->privileged) << "privilege is signed, not sent beside it";
    // Not a ticket another host could use.
    EXPECT_FALSE(
        net::VerifyTicket(jobs[i].ticket, key, net::TicketKind::kDispatch, "h2", 1001, &why));
  }
}

TEST(DispatchBodies, ABigBatchIsSplitUnderTheLimitKeepingEveryJob) {
  auto target = TargetOf(40, 1000, net::NewTicketKey());
  std::vector<size_t> first;
  const size_t max = 8 * 1024;
  auto bodies = DispatchBodies("h1", target, 1000, max, &first);
  ASSERT_GT(bodies.size(), 1u);
  ASSERT_EQ(bodies.size(), first.size());
  int64_t next = 1;
  for (size_t b = 0; b < bodies.size(); ++b) {
    EXPECT_LE(bodies[b].size(), max) << "body " << b;
    auto jobs = hostapi::DecodeDispatch(bodies[b]);
    EXPECT_EQ(static_cast<size_t>(next - 1), first[b]);
    for (const auto& j : jobs) EXPECT_EQ(next++, j.job);
  }
  EXPECT_EQ(41, next);
}

TEST(DispatchBodies, AHostWithoutAKeyGetsNoTicketAndRefusesTheBatch) {
  auto target = TargetOf(1, 10, "");
  std::vector<size_t> first;
  auto body = DispatchBodies("h1", target, 1000, kMaxDispatchBytes, &first)[0];
  EXPECT_EQ(std::string::npos, body.find("ticket")) << body;
  // hostd answers 400 and the job goes back to pending (pgfleet.dispatch_failed).
  try {
    hostapi::DecodeDispatch(body);
    ADD_FAILURE() << "a job without a ticket was accepted";
  } catch (const model::SpecError& e) {
    EXPECT_EQ("jobs[0].ticket", e.field());
  }
}

TEST(DeliveryOf, OnlyA200IsTakenAndAnAnswerThatNeverCameMayHaveStarted) {
  using Kind = Delivery::Kind;
  auto ok = std::make_unique<httplib::Response>();
  ok->status = 200;
  EXPECT_EQ(Kind::kTaken, DeliveryOf(httplib::Result(std::move(ok), httplib::Error::Success), "u").kind);
  auto refused = std::make_unique<httplib::Response>();
  refused->status = 400;
  refused->body = "jobs[0].ticket: expired";
  auto d = DeliveryOf(httplib::Result(std::move(refused), httplib::Error::Success), "u");
  EXPECT_EQ(Kind::kFailed, d.kind);
  EXPECT_EQ("HTTP 400: jobs[0].ticket: expired", d.error);
  // Nothing reached the host: certainly not started.
  EXPECT_EQ(Kind::kFailed, DeliveryOf(httplib::Result(nullptr, httplib::Error::Connection), "u").kind);
  EXPECT_EQ(Kind::kFailed, DeliveryOf(httplib::Result(nullptr, httplib::Error::Write), "u").kind);
  // The request went out and the answer did not come: maybe started.
  d = DeliveryOf(httplib::Result(nullptr, httplib::Error::Read), "http://h1:7000");
  EXPECT_EQ(Kind::kUnanswered, d.kind);
  EXPECT_NE(std::string::npos, d.error.find("no answer from http://h1:7000")) << d.error;
}

}  // namespace
}  // namespace pgfleet::schedulerd
