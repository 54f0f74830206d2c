#include "core/placement/reconcile.h"

#include <gtest/gtest.h>

namespace pgfleet::placement {
namespace {

// A running replica is healthy here (ReconcileService counts healthy ones
// as serving); RUnhealthy makes one that runs but is not.
ReplicaView R(int64_t id, const std::string& state, bool leaving = false) {
  ReplicaView r{id, model::ParseReplicaState(state).value(), leaving};
  r.healthy = r.state == model::ReplicaState::kRunning;
  return r;
}

TEST(ReconcileService, CreatesMissingReplicas) {
  auto r = ReconcileService(3, {R(1, "running")});
  EXPECT_EQ(2, r.to_create);
  EXPECT_TRUE(r.to_stop.empty());
}

TEST(ReconcileService, NothingToDoWhenDesiredEqualsLive) {
  auto r = ReconcileService(2, {R(1, "running"), R(2, "pending")});
  EXPECT_EQ(0, r.to_create);
  EXPECT_TRUE(r.to_stop.empty());
}

TEST(ReconcileService, ScaleDownStopsPendingThenAssignedThenNewestRunning) {
  auto r = ReconcileService(
      1, {R(1, "running"), R(2, "running"), R(3, "assigned"), R(4, "pending"), R(5, "running")});
  EXPECT_EQ(0, r.to_create);
  EXPECT_EQ((std::vector<int64_t>{4, 3, 5, 2}), r.to_stop);  // keeps the oldest running replica
}

TEST(ReconcileService, ScaleToZeroStopsEverything) {
  auto r = ReconcileService(0, {R(1, "running"), R(2, "pending")});
  EXPECT_EQ(2u, r.to_stop.size());
  EXPECT_EQ(0, r.to_create);
}

TEST(ReconcileService, NegativeDesiredIsZero) {
  auto r = ReconcileService(-4, {R(1, "running")});
  EXPECT_EQ((std::vector<int64_t>{1}), r.to_stop);
}

TEST(ReconcileService, DrainStartsReplacementsBeforeStoppingRunningReplicas) {
  // Three replicas all on a draining host: create three elsewhere, stop none yet.
  auto r =
      ReconcileService(3, {R(1, "running", true), R(2, "running", true), R(3, "running", true)});
  EXPECT_EQ(3, r.to_create);
  EXPECT_TRUE(r.to_stop.empty());
}

TEST(ReconcileService, DrainStopsLeavingReplicasAsReplacementsRun) {
  std::vector<ReplicaView> live = {R(1, "running", true), R(2, "running", true),
                                   R(3, "running", true), R(4, "running"),
                                   R(5, "pending"),       R(6, "assigned")};
  auto r = ReconcileService(3, live);
  EXPECT_EQ(0, r.to_create);
  ASSERT_EQ(1u, r.to_stop.size());  // one replacement runs: one leaving replica may go
  EXPECT_EQ(3, r.to_stop[0]);       // newest first
  live = {R(1, "running", true), R(4, "running"), R(5, "running"), R(6, "running")};
  r = ReconcileService(3, live);
  EXPECT_EQ((std::vector<int64_t>{1}), r.to_stop);
}

TEST(ReconcileService, DrainWaitsForAReplacementToBeHealthyNotJustRunning) {
  std::vector<ReplicaView> live = {R(1, "running", true), R(2, "running")};
  live[1].healthy = false;  // started, checks not passed (or not for min_healthy_time)
  auto r = ReconcileService(1, live);
  EXPECT_EQ(0, r.to_create);
  EXPECT_TRUE(r.to_stop.empty()) << "the leaving replica still serves alone";
  live[1].healthy = true;
  EXPECT_EQ((std::vector<int64_t>{1}), ReconcileService(1, live).to_stop);
}

TEST(ReconcileService, LeavingReplicasThatDoNotServeYetGoAtOnce) {
  auto r = ReconcileService(1, {R(1, "assigned", true)});
  EXPECT_EQ(1, r.to_create);
  EXPECT_EQ((std::vector<int64_t>{1}), r.to_stop);
}

TEST(ReconcileService, NeverFewerThanDesiredServeDuringAnyDrainStep) {
  // Property: for every mix, running replicas not stopped >= min(desired, running replicas).
  for (int desired = 0; desired <= 4; ++desired) {
    for (int mask = 0; mask < (1 << 6); ++mask) {
      std::vector<ReplicaView> live;
      int running = 0;
      for (int i = 0; i < 6; ++i) {
        bool leaving = mask & (1 << i);
        live.push_back(R(i + 1, i % 2 ? "running" : "pending", leaving && i % 2));
        running += i % 2;
      }
      auto r = ReconcileService(desired, live);
      int running_kept = 0;
      for (const auto& v : live) {
        bool stopped = std::find(r.to_stop.begin(), r.to_stop.end(), v.id) != r.to_stop.end();
        if (v.state == model::ReplicaState::kRunning && !stopped) ++running_kept;
      }
      EXPECT_GE(running_kept, std::min(desired, running))
          << "desired=" << desired << " mask=" << mask;
      int live_kept = static_cast<int>(live.size() - r.to_stop.size()) + r.to_create;
      int leaving_kept = 0;
      for (const auto& v : live) {
        bool stopped = std::find(r.to_stop.begin(), r.to_stop.end(), v.id) != r.to_stop.end();
        if (v.on_leaving_host && !stopped) ++leaving_kept;
      }
      EXPECT_EQ(desired, live_kept - leaving_kept) << "desired=" << desired << " mask=" << mask;
    }
  }
}

}  // namespace
}  // namespace pgfleet::placement
