#pragma once
// What the formation pass tests (formation_pass_*_test.cpp) share: the
// FormationPassTest fixture, which runs one formation's pass
// (schedulerd/formation_pass.h) on a FakeFleet, rolls back whatever the pass
// left uncommitted (as PostgreSQL would), and keeps what reached the
// dispatcher and the pass's charged host snapshot.

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "fake_fleet.h"
#include "schedulerd/formation_pass.h"

namespace pgfleet::schedulerd::testing_pass {

class FormationPassTest : public ::testing::Test {
 protected:
  FormationPassResult Run(int batch = 100) {
    FormationPass pass(batch, metrics_);
    try {
      auto r = pass.Work(fleet_, 7, &targets_, &pass_hosts_);
      fleet_.Rollback();  // no-op after a commit
      return r;
    } catch (...) {
      fleet_.Rollback();
      throw;
    }
  }
  size_t Dispatched() const {
    size_t n = 0;
    for (const auto& [host, t] : targets_) n += t.jobs.size();
    return n;
  }

  metrics::Registry metrics_;
  FakeFleet fleet_;
  Targets targets_;
  std::optional<std::vector<store::SnapshotHost>> pass_hosts_;
};

}  // namespace pgfleet::schedulerd::testing_pass
