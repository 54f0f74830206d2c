#pragma once
// What the robustness tests (robustness_*_test.cpp, issue 14) share: the
// RobustnessTest fixture, a scheduler and one host h1 on real daemons and a
// real PostgreSQL, an authorized client of h1's API, and the checks each
// test ends with: hostd still answers, and a job submitted now still runs.

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>

#include "core/net/http.h"
#include "test_support.h"

namespace pgfleet::testing::robustness {

using namespace std::chrono_literals;

class RobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(db_);
    cluster_->StartScheduler("s1");
    host_ = &cluster_->StartHost("h1", 4000, 4000);
    ASSERT_TRUE(cluster_->WaitHostsUp(1)) << cluster_->Logs();
    client_ = std::make_unique<httplib::Client>(
        db_.Scalar("select api_url from pgfleet.hosts where id = 'h1'"));
    client_->set_bearer_token_auth(net::ReadTokenFile(cluster_->token_file()).c_str());
    client_->set_read_timeout(20, 0);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << cluster_->Logs();
  }
  // A job submitted now runs and succeeds: the host still works for others.
  void ExpectAJobStillRuns() {
    auto r = cluster_->Cli({"run", "--wait", "--", "echo", "still-here"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("still-here"), std::string::npos) << r.out;
  }
  void ExpectHostdAlive() {
    EXPECT_TRUE(host_->Running()) << host_->Log();
    auto health = client_->Get("/health");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
  }

  TestDatabase db_;
  std::unique_ptr<Cluster> cluster_;
  Process* host_ = nullptr;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace pgfleet::testing::robustness
