// Rolling updates in the pure core: ReconcileRollout (a service) and
// ReconcileSystemRollout, step by step and over whole simulated rollouts
// whose invariants are checked after every step.

#include "core/placement/rollout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace pgfleet::placement {
namespace {

using model::ReplicaState;

ReplicaView Replica(int64_t id, int version, ReplicaState state, bool healthy = false) {
  ReplicaView r;
  r.id = id;
  r.version = version;
  r.state = state;
  r.healthy = healthy;
  return r;
}

std::vector<ReplicaView> Healthy(int count, int version, int64_t first_id = 1) {
  std::vector<ReplicaView> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(Replica(first_id + i, version, ReplicaState::kRunning, true));
  }
  return out;
}

RolloutView To(int version, int max_parallel = 1, int canary = 0, bool promoted = false,
               int stopping = 0) {
  return RolloutView{version, max_parallel, canary, promoted, stopping};
}

TEST(ResolveMaxParallel, CountsAndPercentagesRoundUpToAtLeastOne) {
  EXPECT_EQ(3, ResolveMaxParallel("3", 10));
  EXPECT_EQ(1, ResolveMaxParallel("25%", 4));
  EXPECT_EQ(2, ResolveMaxParallel("25%", 5));
  EXPECT_EQ(10, ResolveMaxParallel("100%", 10));
  EXPECT_EQ(1, ResolveMaxParallel("10%", 0));
  EXPECT_EQ(1, ResolveMaxParallel("", 10));
  EXPECT_EQ(1, ResolveMaxParallel("x%", 10));
  EXPECT_EQ(1, ResolveMaxParallel("-3", 10));
  EXPECT_EQ(1, ResolveMaxParallel("3x", 10));
}

TEST(ReconcileRollout, StartsMaxParallelNewReplicasAndStopsNoOldOneYet) {
  auto step = ReconcileRollout(4, To(2), Healthy(4, 1));
  EXPECT_EQ(1, step.to_create);
  EXPECT_TRUE(step.replace.empty());
  EXPECT_EQ(RolloutPhase::kRunning, step.phase);
  EXPECT_EQ(4, step.old);
  step = ReconcileRollout(4, To(2, 3), Healthy(4, 1));
  EXPECT_EQ(3, step.to_create);
}

TEST(ReconcileRollout, AnOldReplicaGoesOnlyForAHealthyNewOne) {
  auto live = Healthy(4, 1);
  live.push_back(
      Replica(10, 2, ReplicaState::kRunning, false));  // started, not healthy long enough
  auto step = ReconcileRollout(4, To(2), live);
  EXPECT_TRUE(step.replace.empty());
  EXPECT_EQ(0, step.to_create) << "one new replica on its way is max_parallel";
  live.back().healthy = true;
  step = ReconcileRollout(4, To(2), live);
  ASSERT_EQ(1u, step.replace.size());
  EXPECT_EQ(4, step.replace[0]) << "the newest old replica goes first";
  EXPECT_EQ(0, step.to_create) << "the stopped one still runs: 5 hold a place";
  // Once it has stopped (no longer live, not stopping), the next starts.
  live.erase(live.begin() + 3);
  step = ReconcileRollout(4, To(2), live);
  EXPECT_EQ(1, step.to_create);
  // While it still stops, not.
  step = ReconcileRollout(4, To(2, 1, 0, false, 1), live);
  EXPECT_EQ(0, step.to_create);
}

TEST(ReconcileRollout, OldReplicasThatServeNothingGoAtOnce) {
  // A crash-looping old version: its replicas wait for their backoff (pending).
  std::vector<ReplicaView> live = {Replica(1, 1, ReplicaState::kPending),
                                   Replica(2, 1, ReplicaState::kPending),
                                   Replica(3, 1, ReplicaState::kRunning, true)};
  auto step = ReconcileRollout(3, To(2), live);
  EXPECT_EQ((std::vector<int64_t>{2, 1}), step.replace);
  EXPECT_EQ(1, step.to_create) << "still max_parallel new replicas on their way at once";
}

TEST(ReconcileRollout, CanariesRunBesideEveryOldReplicaUntilPromoted) {
  auto step = ReconcileRollout(4, To(2, 1, 2), Healthy(4, 1));
  EXPECT_EQ(2, step.to_create);
  EXPECT_TRUE(step.replace.empty());
  EXPECT_EQ(RolloutPhase::kCanary, step.phase);
  auto live = Healthy(4, 1);
  live.push_back(Replica(10, 2, ReplicaState::kRunning, true));
  live.push_back(Replica(11, 2, ReplicaState::kRunning, true));
  step = ReconcileRollout(4, To(2, 1, 2), live);
  EXPECT_EQ(0, step.to_create);
  EXPECT_TRUE(step.replace.empty());
  EXPECT_EQ(RolloutPhase::kWaitingPromotion, step.phase);
  EXPECT_EQ(2, step.healthy);
  // Promoted: the healthy canaries replace two old replicas at once.
  step = ReconcileRollout(4, To(2, 1, 2, true), live);
  EXPECT_EQ(2u, step.replace.size());
  EXPECT_EQ(RolloutPhase::kRunning, step.phase);
}

TEST(ReconcileRollout, DoneWhenEveryReplicaRunsTheVersionHealthy) {
  auto step = ReconcileRollout(3, To(2), Healthy(3, 2));
  EXPECT_EQ(RolloutPhase::kDone, step.phase);
  EXPECT_EQ(3, step.updated);
  EXPECT_EQ(3, step.healthy);
  auto live = Healthy(3, 2);
  live[0].healthy = false;
  EXPECT_EQ(RolloutPhase::kRunning, ReconcileRollout(3, To(2), live).phase);
  EXPECT_EQ(RolloutPhase::kDone, ReconcileRollout(0, To(2), {}).phase);
}

TEST(ReconcileRollout, ScaleDownMidRolloutStopsSurplus) {
  auto live = Healthy(4, 1);
  live.push_back(Replica(10, 2, ReplicaState::kRunning, true));
  auto step = ReconcileRollout(2, To(2), live);
  // 4 old + 1 healthy new for 2 wanted: three old go.
  EXPECT_EQ(3u, step.replace.size());
  EXPECT_EQ(1, step.old);
}

// A whole rollout, simulated: new replicas run one step after they are
// created and are healthy one step later; a stopped replica still runs for
// one step. After every step: never more than desired + P hold a place,
// never fewer than desired - P healthy.
struct World {
  struct R {
    ReplicaView view;
    int age = 0;
    bool stopping = false;
    bool never_healthy = false;
  };
  std::map<int64_t, R> replicas;
  int64_t next_id = 100;

  std::vector<ReplicaView> Live() const {
    std::vector<ReplicaView> out;
    for (const auto& [id, r] : replicas) {
      if (!r.stopping) out.push_back(r.view);
    }
    return out;
  }
  int Stopping() const {
    return static_cast<int>(std::count_if(replicas.begin(), replicas.end(),
                                          [](const auto& e) { return e.second.stopping; }));
  }
  int HealthyCount() const {
    int n = 0;
    for (const auto& [id, r] : replicas) n += !r.stopping && r.view.healthy ? 1 : 0;
    return n;
  }
  void Apply(const RolloutStep& step, int version, bool new_ones_fail) {
    for (int64_t id : step.replace) replicas.at(id).stopping = true;
    for (int64_t id : step.surplus) replicas.at(id).stopping = true;
    for (int i = 0; i < step.to_create; ++i) {
      R r;
      r.view = Replica(next_id, version, ReplicaState::kPending);
      r.never_healthy = new_ones_fail;
      replicas[next_id++] = r;
    }
  }
  void Tick() {
    for (auto it = replicas.begin(); it != replicas.end();) {
      R& r = it->second;
      if (r.stopping) {
        it = replicas.erase(it);
        continue;
      }
      ++r.age;
      if (r.age >= 1) r.view.state = ReplicaState::kRunning;
      if (r.age >= 2 && !r.never_healthy) r.view.healthy = true;
      ++it;
    }
  }
};

void RollOut(int desired, int parallel, int steps_at_most) {
  SCOPED_TRACE("desired " + std::to_string(desired) + " max_parallel " + std::to_string(parallel));
  World w;
  for (const auto& r : Healthy(desired, 1)) w.replicas[r.id] = {r, 10};
  bool done = false;
  for (int i = 0; i < steps_at_most && !done; ++i) {
    auto step = ReconcileRollout(desired, To(2, parallel, 0, false, w.Stopping()), w.Live());
    done = step.phase == RolloutPhase::kDone;
    w.Apply(step, 2, false);
    EXPECT_LE(static_cast<int>(w.replicas.size()), desired + parallel) << "step " << i;
    EXPECT_GE(w.HealthyCount(), desired - parallel) << "step " << i;
    w.Tick();
  }
  ASSERT_TRUE(done);
  for (const auto& [id, r] : w.replicas) EXPECT_EQ(2, r.view.version);
  EXPECT_EQ(desired, static_cast<int>(w.replicas.size()));
}

TEST(ReconcileRollout, WholeRolloutsKeepTheirBounds) {
  RollOut(4, 1, 40);
  RollOut(4, 2, 40);
  RollOut(10, 3, 60);
  RollOut(1, 1, 20);
  RollOut(7, 10, 20);
}

TEST(ReconcileRollout, ANewVersionThatNeverBecomesHealthyStopsNoOldReplica) {
  World w;
  for (const auto& r : Healthy(4, 1)) w.replicas[r.id] = {r, 10};
  for (int i = 0; i < 20; ++i) {
    auto step = ReconcileRollout(4, To(2, 1, 0, false, w.Stopping()), w.Live());
    EXPECT_TRUE(step.replace.empty());
    EXPECT_NE(RolloutPhase::kDone, step.phase);
    w.Apply(step, 2, true);
    w.Tick();
  }
  EXPECT_EQ(4, w.HealthyCount());
  EXPECT_EQ(5u, w.replicas.size()) << "one new replica, never more";
}

TEST(ReconcileSystemRollout, StopsOldReplicasMaxParallelAtATime) {
  std::vector<ReplicaView> live = Healthy(5, 1);
  auto step = ReconcileSystemRollout(To(2, 2), live);
  EXPECT_EQ(2u, step.replace.size());
  EXPECT_EQ(RolloutPhase::kRunning, step.phase);
  // Two on their way (one stopping, one new not healthy): none more.
  live.resize(3);
  live.push_back(Replica(10, 2, ReplicaState::kRunning, false));
  step = ReconcileSystemRollout(To(2, 2, 0, true, 1), live);
  EXPECT_TRUE(step.replace.empty());
  live.back().healthy = true;
  step = ReconcileSystemRollout(To(2, 2, 0, true, 0), live);
  EXPECT_EQ(2u, step.replace.size());
  EXPECT_EQ(RolloutPhase::kRunning, step.phase);
  EXPECT_EQ(RolloutPhase::kDone, ReconcileSystemRollout(To(2, 2), Healthy(3, 2)).phase);
}

}  // namespace
}  // namespace pgfleet::placement
