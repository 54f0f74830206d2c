// When an insert into jobs wakes a sleeping scheduler, against the real
// server: the trigger notifies once per formation per statement while a
// scheduler sleeps, nothing while none does (and none can fall asleep until
// the insert commits), and nothing for a rolled-back insert.

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model/constants.h"
#include "schema_probes.h"

namespace pgfleet::testing_schema {
namespace {

TEST(JobsTrigger, NotifiesOncePerFormationPerStatementWhenASchedulerSleeps) {
  TestDatabase db;
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  ASSERT_TRUE(TryIdleLock(*listener));

  auto writer = db.Connect();
  {
    pqxx::work tx(*writer);
    tx.exec0(
        "insert into pgfleet.jobs (command, formation) "
        "select array['true'], 'f' || (g % 3) from generate_series(1, 10000) g");
    tx.commit();
  }
  CollectFor(*listener, std::chrono::seconds(1));

  std::map<std::string, std::string> ids;  // name -> id
  {
    pqxx::work tx(*writer);
    for (const auto& row :
         tx.exec("select name, id::text from pgfleet.formations where name in ('f0', 'f1', 'f2')"))
      ids[row[0].as<std::string>()] = row[1].as<std::string>();
  }
  ASSERT_EQ(ids.size(), 3u);
  std::multiset<std::string> got(collector.payloads.begin(), collector.payloads.end());
  std::multiset<std::string> want = {ids["f0"], ids["f1"], ids["f2"]};
  EXPECT_EQ(got, want);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 10000);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'created'"), 10000);

  collector.payloads.clear();
  {
    pqxx::work tx(*writer);
    tx.exec0("insert into pgfleet.jobs (command, formation) values (array['true'], 'f1')");
    tx.commit();
  }
  CollectFor(*listener, std::chrono::seconds(1));
  EXPECT_EQ(collector.payloads, std::vector<std::string>{ids["f1"]});
}

TEST(JobsTrigger, WithNoSchedulerAsleepAnInsertNotifiesNothingAndHoldsOffSleepUntilItCommits) {
  TestDatabase db;
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  auto writer = db.Connect();
  auto scheduler = db.Connect();
  {
    pqxx::work tx(*writer);
    tx.exec0("insert into pgfleet.jobs (command) values (array['true'])");
    // A scheduler cannot go to sleep while this insert is in flight: it would
    // miss it (no NOTIFY was sent).
    EXPECT_FALSE(TryIdleLock(*scheduler));
    tx.commit();
  }
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_TRUE(collector.payloads.empty());
  // Committed: now it can, and a look at the table finds the job.
  EXPECT_TRUE(TryIdleLock(*scheduler));
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where state = 'pending'"), 1);
  // While it sleeps, the next insert notifies.
  db.Scalar("insert into pgfleet.jobs (command) values (array['true'])");
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_EQ(collector.payloads.size(), 1u);
}

TEST(JobsTrigger, RolledBackInsertNotifiesNothing) {
  TestDatabase db;
  auto listener = db.Connect();
  Collector collector(*listener, model::kWorkChannel);
  ASSERT_TRUE(TryIdleLock(*listener));
  auto writer = db.Connect();
  {
    pqxx::work tx(*writer);
    tx.exec0("insert into pgfleet.jobs (command) values (array['true'])");
    tx.abort();
  }
  CollectFor(*listener, std::chrono::milliseconds(500));
  EXPECT_TRUE(collector.payloads.empty());
}

}  // namespace
}  // namespace pgfleet::testing_schema
