// Sysbatch formations in the pure core: ReconcileSysbatch (one job per
// (formation, host) for the formation's life, none for new hosts once done,
// a job that never ran cancelled once its host is removed).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/placement/reconcile.h"

namespace pgfleet::placement {
namespace {

SysbatchJobView Job(int64_t id, const std::string& host, bool pending = false,
                    bool host_exists = true) {
  return {id, host, pending, host_exists};
}

TEST(ReconcileSysbatch, EveryEligibleHostGetsOneJob) {
  auto r = ReconcileSysbatch({"h3", "h1", "h2"}, {}, false);
  EXPECT_EQ((std::vector<std::string>{"h1", "h2", "h3"}), r.create_on);
  EXPECT_TRUE(r.to_cancel.empty());
}

TEST(ReconcileSysbatch, AHostThatHadAJobInAnyStateGetsNoSecond) {
  // Whatever became of it: pending, running, succeeded, failed, cancelled
  // are all "a job" here; only h5 never had one.
  auto r = ReconcileSysbatch({"h1", "h2", "h3", "h4", "h5"},
                             {Job(1, "h1", true), Job(2, "h2"), Job(3, "h3"), Job(4, "h4")}, false);
  EXPECT_EQ((std::vector<std::string>{"h5"}), r.create_on);
  EXPECT_TRUE(r.to_cancel.empty());
}

TEST(ReconcileSysbatch, AHostThatJoinsLaterGetsOneUntilDone) {
  const std::vector<SysbatchJobView> ran = {Job(1, "h1"), Job(2, "h2"), Job(3, "h3")};
  EXPECT_EQ((std::vector<std::string>{"h4"}),
            ReconcileSysbatch({"h1", "h2", "h3", "h4"}, ran, false).create_on);
  EXPECT_TRUE(ReconcileSysbatch({"h1", "h2", "h3", "h4"}, ran, true).create_on.empty())
      << "done: a host that joins gets none";
}

TEST(ReconcileSysbatch, AJobWhoseHostLeftWaitsAndIsCancelledOnlyOnceTheHostIsRemoved) {
  // h2 drained or went offline (not eligible, still a host): its pending job
  // waits for it. h9 was removed: its pending job is cancelled. h7 was
  // removed after its job ran: nothing to cancel.
  auto r = ReconcileSysbatch(
      {"h1"},
      {Job(1, "h1"), Job(2, "h2", true), Job(9, "h9", true, false), Job(7, "h7", false, false)},
      false);
  EXPECT_TRUE(r.create_on.empty());
  EXPECT_EQ((std::vector<int64_t>{9}), r.to_cancel);
  EXPECT_EQ((std::vector<int64_t>{9}),
            ReconcileSysbatch({}, {Job(9, "h9", true, false)}, true).to_cancel)
      << "done or not";
}

TEST(ReconcileSysbatch, ARemovedHostThatComesBackGetsNoSecondJob) {
  // h9 was removed (its pending job is being cancelled) and registered
  // again: it already had its one job.
  auto r = ReconcileSysbatch({"h9"}, {Job(9, "h9", false, true)}, false);
  EXPECT_TRUE(r.create_on.empty());
}

}  // namespace
}  // namespace pgfleet::placement
