#include "core/placement/rollout.h"

#include <algorithm>
#include <charconv>

namespace pgfleet::placement {
namespace {

// How much a replica serves: pending, assigned, running unhealthy, running
// not yet healthy (long enough), healthy. Least useful goes first.
int Usefulness(const ReplicaView& r) {
  switch (r.state) {
    case model::ReplicaState::kPending:
      return 0;
    case model::ReplicaState::kAssigned:
      return 1;
    case model::ReplicaState::kRunning:
      break;
  }
  if (r.unhealthy) return 2;
  return r.healthy ? 4 : 3;
}

// Least useful first; the newest first among equals (keep proven replicas).
bool LessUseful(const ReplicaView& a, const ReplicaView& b) {
  int ua = Usefulness(a), ub = Usefulness(b);
  if (ua != ub) return ua < ub;
  return a.id > b.id;
}

struct Split {
  std::vector<ReplicaView> fresh;  // of the rolled-out version
  std::vector<ReplicaView> old;    // of any other
};

Split SplitByVersion(int version, const std::vector<ReplicaView>& live) {
  Split s;
  for (const auto& r : live) (r.version == version ? s.fresh : s.old).push_back(r);
  std::sort(s.fresh.begin(), s.fresh.end(), LessUseful);
  std::sort(s.old.begin(), s.old.end(), LessUseful);
  return s;
}

int CountHealthy(const std::vector<ReplicaView>& rs) {
  return static_cast<int>(
      std::count_if(rs.begin(), rs.end(), [](const auto& r) { return r.healthy; }));
}

int CountIdle(const std::vector<ReplicaView>& rs) {
  return static_cast<int>(std::count_if(rs.begin(), rs.end(), [](const auto& r) {
    return r.state != model::ReplicaState::kRunning;
  }));
}

// Moves the first n of `from` (least useful first) into `ids`; returns how
// many of them still hold a place on a host (assigned or running).
int TakeFirst(std::vector<ReplicaView>* from, int n, std::vector<int64_t>* ids) {
  n = std::clamp(n, 0, static_cast<int>(from->size()));
  int placed = 0;
  for (int i = 0; i < n; ++i) {
    ids->push_back((*from)[i].id);
    placed += (*from)[i].state == model::ReplicaState::kPending ? 0 : 1;
  }
  from->erase(from->begin(), from->begin() + n);
  return placed;
}

void Count(const Split& s, RolloutStep* out) {
  out->updated = static_cast<int>(s.fresh.size());
  out->healthy = CountHealthy(s.fresh);
  out->old = static_cast<int>(s.old.size());
}

}  // namespace

std::string_view ToString(RolloutPhase p) {
  switch (p) {
    case RolloutPhase::kCanary:
      return "canary";
    case RolloutPhase::kWaitingPromotion:
      return "waiting_promotion";
    case RolloutPhase::kRunning:
      return "running";
    case RolloutPhase::kDone:
      return "succeeded";
  }
  return "running";
}

int ResolveMaxParallel(std::string_view text, int of) {
  bool percent = !text.empty() && text.back() == '%';
  if (percent) text.remove_suffix(1);
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) return 1;
  if (!percent) return value;
  int64_t scaled = (int64_t{std::max(of, 0)} * value + 99) / 100;  // rounded up
  return static_cast<int>(std::clamp<int64_t>(scaled, 1, std::max(of, 1)));
}

RolloutStep ReconcileRollout(int desired, const RolloutView& rollout,
                             const std::vector<ReplicaView>& live) {
  desired = std::max(desired, 0);
  const int parallel = std::max(rollout.max_parallel, 1);
  const bool canaries = rollout.canary > 0 && !rollout.promoted;
  const int want_fresh = canaries ? std::min(rollout.canary, desired) : desired;
  Split s = SplitByVersion(rollout.version, live);
  RolloutStep out;
  int surplus_fresh = static_cast<int>(s.fresh.size()) - want_fresh;
  int stopping = rollout.stopping + TakeFirst(&s.fresh, surplus_fresh, &out.surplus);

  if (canaries) {
    // Every old replica keeps serving beside the canaries (a scale-down
    // still applies to them).
    stopping += TakeFirst(&s.old, static_cast<int>(s.old.size()) - desired, &out.surplus);
    out.to_create = want_fresh - static_cast<int>(s.fresh.size());
    Count(s, &out);
    out.phase = out.healthy >= want_fresh ? RolloutPhase::kWaitingPromotion : RolloutPhase::kCanary;
    return out;
  }

  // An old replica goes for each healthy new one beyond `desired`, and at
  // once if it serves nothing (pending or assigned: least useful, so first).
  const int healthy_fresh = CountHealthy(s.fresh);
  const int old_count = static_cast<int>(s.old.size());
  int replace = std::max(old_count + healthy_fresh - desired, CountIdle(s.old));
  stopping += TakeFirst(&s.old, replace, &out.replace);

  const int fresh_count = static_cast<int>(s.fresh.size());
  const int in_flight = fresh_count - healthy_fresh;
  const int holding = static_cast<int>(s.old.size()) + fresh_count + stopping;
  out.to_create = std::max(
      0, std::min({desired - fresh_count, parallel - in_flight, desired + parallel - holding}));
  Count(s, &out);
  out.phase =
      s.old.empty() && out.to_create == 0 && fresh_count == desired && healthy_fresh == desired
          ? RolloutPhase::kDone
          : RolloutPhase::kRunning;
  return out;
}

RolloutStep ReconcileSystemRollout(const RolloutView& rollout,
                                   const std::vector<ReplicaView>& live) {
  const int parallel = std::max(rollout.max_parallel, 1);
  Split s = SplitByVersion(rollout.version, live);
  RolloutStep out;
  const bool had_old = !s.old.empty();
  const int in_flight = static_cast<int>(s.fresh.size()) - CountHealthy(s.fresh);
  int replace = std::max(parallel - in_flight - rollout.stopping, CountIdle(s.old));
  TakeFirst(&s.old, replace, &out.replace);
  Count(s, &out);
  out.phase = !had_old && in_flight == 0 && rollout.stopping == 0 ? RolloutPhase::kDone
                                                                  : RolloutPhase::kRunning;
  return out;
}

}  // namespace pgfleet::placement
