// The dashboard's JSON API against a real cluster (issue 39, item 2): it
// lists hosts, formations and jobs with filters, shows a job with its
// attempts, events and output (read from the host with a log ticket), and
// what a login sees is what row-level security lets it see; its event
// stream says when something changed, and it bounds how many streams are open.

#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/util/text.h"
#include "test_support.h"
#include "ui_fixture.h"

namespace pgfleet::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

class UiApiTest : public OneHostClusterTest {
 protected:
  std::unique_ptr<UiProcess> StartUi(const std::string& dsn, std::vector<std::string> extra = {}) {
    auto ui = std::make_unique<UiProcess>(dsn, cluster_->dir() + "/ui-" +
                                                   std::to_string(++uis_) + ".log",
                                          std::move(extra));
    EXPECT_GT(ui->port(), 0) << ui->process().Log();
    return ui;
  }
  static std::vector<int64_t> Ids(const std::string& body) {
    std::vector<int64_t> ids;
    for (const auto& j : json::parse(body)) ids.push_back(j["id"].get<int64_t>());
    return ids;
  }
  int64_t Submit(std::vector<std::string> args, const std::string& dsn = "") {
    args.insert(args.begin(), "run");
    auto r = dsn.empty() ? cluster_->Cli(args) : cluster_->CliAs(dsn, args);
    EXPECT_EQ(0, r.exit_code) << r.err;
    return std::stoll(util::Trim(r.out));
  }
  int uis_ = 0;
};

TEST_F(UiApiTest, ListsHostsFormationsAndJobsWithFiltersAndShowsAJob) {
  auto ok = cluster_->Cli({"run", "--wait", "--formation", "nightly", "--", "echo", "hello-ui"});
  ASSERT_EQ(0, ok.exit_code) << ok.err;
  int64_t succeeded = std::stoll(db_.Scalar("select max(id) from pgfleet.jobs"));
  int64_t pending = Submit({"--memory", "100000", "--", "true"});  // never placed
  ASSERT_EQ(0, cluster_->Cli({"formation", "create", "web", "--kind", "service", "--replicas",
                              "1", "--", "sleep", "300"}).exit_code);

  auto ui = StartUi(db_.dsn());
  auto [st, summary] = ui->Get("/api/summary");
  ASSERT_EQ(200, st) << summary;
  EXPECT_EQ(1, json::parse(summary)["hosts_up"].get<int>()) << summary;

  auto [hs, hosts] = ui->Get("/api/hosts");
  ASSERT_EQ(200, hs) << hosts;
  auto h = json::parse(hosts);
  ASSERT_EQ(1u, h.size()) << hosts;
  EXPECT_EQ("h1", h[0]["id"]);
  EXPECT_EQ("up", h[0]["state"]);
  EXPECT_EQ(4000, h[0]["cpu"].get<int>());
  EXPECT_TRUE(h[0].contains("heartbeat_age_s") && h[0].contains("labels") &&
              h[0].contains("driver") && h[0].contains("condition"))
      << hosts;

  auto [fs, formations] = ui->Get("/api/formations");
  ASSERT_EQ(200, fs) << formations;
  bool web = false;
  for (const auto& f : json::parse(formations)) {
    if (f["name"] == "web") {
      web = true;
      EXPECT_EQ("service", f["kind"]);
      EXPECT_EQ(1, f["desired"].get<int>());
    }
  }
  EXPECT_TRUE(web) << formations;

  auto [js, all] = ui->Get("/api/jobs");
  ASSERT_EQ(200, js) << all;
  auto ids = Ids(all);
  EXPECT_NE(ids.end(), std::find(ids.begin(), ids.end(), succeeded)) << all;
  EXPECT_NE(ids.end(), std::find(ids.begin(), ids.end(), pending)) << all;
  EXPECT_EQ(std::vector<int64_t>{succeeded}, Ids(ui->Get("/api/jobs?state=succeeded").second));
  EXPECT_EQ(std::vector<int64_t>{succeeded}, Ids(ui->Get("/api/jobs?formation=nightly").second));
  EXPECT_EQ(std::vector<int64_t>{pending},
            Ids(ui->Get("/api/jobs?state=pending&formation=default").second));
  EXPECT_EQ(std::vector<int64_t>{}, Ids(ui->Get("/api/jobs?owner=nobody-here").second));
  EXPECT_EQ(std::vector<int64_t>{succeeded},
            Ids(ui->Get("/api/jobs?host=h1&state=succeeded").second));
  EXPECT_EQ(1u, Ids(ui->Get("/api/jobs?limit=1").second).size());

  auto [jst, jdoc] = ui->Get("/api/jobs/" + std::to_string(succeeded));
  ASSERT_EQ(200, jst) << jdoc;
  auto job = json::parse(jdoc);
  EXPECT_EQ("succeeded", job["state"]);
  EXPECT_EQ(0, job["exit_code"].get<int>());
  ASSERT_EQ(1u, job["attempts"].size()) << jdoc;
  EXPECT_EQ("h1", job["attempts"][0]["host_id"]);
  EXPECT_GE(job["events"].size(), 3u) << jdoc;  // created, assigned, running, succeeded

  // The output, from the host, with a ticket minted for this login.
  auto [lst, ldoc] = ui->Get("/api/jobs/" + std::to_string(succeeded) + "/log");
  ASSERT_EQ(200, lst) << ldoc;
  auto log = json::parse(ldoc);
  EXPECT_EQ("host", log["source"]) << ldoc;
  EXPECT_NE(std::string::npos, log["text"].get<std::string>().find("hello-ui")) << ldoc;
  auto [nst, ndoc] = ui->Get("/api/jobs/" + std::to_string(pending) + "/log");
  EXPECT_EQ(200, nst);
  EXPECT_EQ("none", json::parse(ndoc)["source"]) << ndoc;
  EXPECT_EQ(400, ui->Get("/api/jobs/" + std::to_string(succeeded) + "/log?attempt=2").first);
  EXPECT_EQ(404, ui->Get("/api/jobs/999999/log").first);
  EXPECT_EQ(404, ui->Get("/api/jobs/999999").first);
}

TEST_F(UiApiTest, ASubmitterSeesItsOwnJobsAndAReaderEveryJobWithEnvMasked) {
  std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  std::string reader = db_.CreateLogin("viewer", {"pgfleet_reader"});
  int64_t mine = Submit({"--env", "SECRET=s3cret", "--", "true"}, db_.DsnAs(alice));
  int64_t other = Submit({"--", "true"});

  auto as_alice = StartUi(db_.DsnAs(alice));
  EXPECT_EQ(std::vector<int64_t>{mine}, Ids(as_alice->Get("/api/jobs").second));
  EXPECT_EQ(404, as_alice->Get("/api/jobs/" + std::to_string(other)).first);
  auto own = json::parse(as_alice->Get("/api/jobs/" + std::to_string(mine)).second);
  EXPECT_EQ("s3cret", own["env"]["SECRET"]);
  EXPECT_EQ(200, as_alice->Get("/api/hosts").first);

  auto as_reader = StartUi(db_.DsnAs(reader));
  auto ids = Ids(as_reader->Get("/api/jobs").second);
  EXPECT_EQ((std::vector<int64_t>{other, mine}), ids);
  auto masked = json::parse(as_reader->Get("/api/jobs/" + std::to_string(mine)).second);
  EXPECT_EQ("********", masked["env"]["SECRET"]);
  EXPECT_EQ(200, as_reader->Get("/api/formations").first);
  EXPECT_EQ(200, as_reader->Get("/api/summary").first);
}

TEST_F(UiApiTest, TheEventStreamSaysWhenAJobChangesAndIsBounded) {
  auto ui = StartUi(db_.dsn(), {"--max-streams", "1"});
  std::mutex mu;
  std::string stream;
  auto received = [&] {
    std::lock_guard lock(mu);
    return stream;
  };
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    auto c = ui->Client();
    c->set_read_timeout(30, 0);
    c->Get("/api/events", [&](const char* data, size_t len) {
      std::lock_guard lock(mu);
      stream.append(data, len);
      return !stop.load();
    });
  });
  ASSERT_TRUE(WaitFor([&] { return received().find("event: hello") != std::string::npos; }, 10s))
      << received();
  // The one stream allowed is open: another is refused.
  EXPECT_EQ(503, ui->Get("/api/events").first);
  auto before = received().size();
  Submit({"--", "true"});
  EXPECT_TRUE(WaitFor(
      [&] { return received().find("event: changed", before) != std::string::npos; }, 15s))
      << received();
  stop = true;
  reader.join();
  // The stream's place is given back once its page is gone.
  EXPECT_TRUE(WaitFor(
      [&] {
        auto c = ui->Client();
        c->set_read_timeout(2, 0);
        int status = 0;
        c->Get(
            "/api/events",
            [&](const httplib::Response& r) {
              status = r.status;
              return false;
            },
            [](const char*, size_t) { return false; });
        return status == 200;
      },
      20s));
}

}  // namespace
}  // namespace pgfleet::testing
