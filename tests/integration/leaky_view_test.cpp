// The leaky-function attack (issue 34) against every view a submitter may
// read: a function of the attacker's own, declared cheap and immutable so
// the planner runs it before the view's own filter, RAISEs every value it is
// shown. Through no view may it see another owner's job.

#include <gtest/gtest.h>

#include <pqxx/errorhandler>
#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

// Every notice the server sends on a connection.
class Notices : public pqxx::errorhandler {
 public:
  explicit Notices(pqxx::connection_base& c) : pqxx::errorhandler(c) {}
  bool operator()(const char msg[]) noexcept override {
    text += msg;
    return true;
  }
  std::string text;
};

TEST(LeakyFunction, NoViewShowsAnotherOwnersJobToAFunctionInTheCallersQuery) {
  TestDatabase db;
  Sql bob(db.DsnAs(db.CreateLogin("bob", {"pgfleet_submitter"})));
  bob.Exec("select pgfleet.submit(array['echo', 'BOBSECRET'], idempotency_key => 'BOBKEY')");
  pqxx::connection alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  Notices seen(alice);
  {
    pqxx::work tx(alice);
    tx.exec0(
        "create function pg_temp.leak(t text) returns boolean language plpgsql immutable"
        " cost 0.0000001 as $$ begin raise notice 'LEAK %', t; return true; end $$");
    // Every view a submitter may read (the grants say which), each row whole.
    auto views = tx.exec(
        "select format('%I.%I', table_schema, table_name) from information_schema.role_table_grants"
        " where table_schema = 'pgfleet' and privilege_type = 'SELECT'"
        "   and grantee = 'pgfleet_submitter'"
        "   and table_name in (select viewname from pg_views where schemaname = 'pgfleet')");
    ASSERT_GE(views.size(), 4u);
    for (const auto& v : views) {
      std::string view = v[0].as<std::string>();
      tx.exec("select count(*) from " + view + " x where pg_temp.leak(x::text)");
    }
    // And column by column where the view has the columns (a whole-row
    // reference may keep the view from being flattened into the query).
    tx.exec("select id from pgfleet.visible_jobs where pg_temp.leak(command::text)"
            " and pg_temp.leak(coalesce(idempotency_key, ''))");
    tx.commit();
  }
  EXPECT_NE(seen.text.find("LEAK"), std::string::npos) << "the function never ran";
  EXPECT_EQ(seen.text.find("BOBSECRET"), std::string::npos) << seen.text;
  EXPECT_EQ(seen.text.find("BOBKEY"), std::string::npos) << seen.text;
}

}  // namespace
}  // namespace pgfleet::integration
