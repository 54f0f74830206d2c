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

// Job ids are the identity's: a submitter cannot set one by any spelling
// (OVERRIDING SYSTEM VALUE included). An id <= 0 made every dispatch batch
// that held it fail; future ids made other tenants' inserts fail.
TEST(SystemColumns, ASubmitterCannotSetAJobsId) {
  TestDatabase db;
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  for (const std::string& sql : {
           std::string("insert into pgfleet.jobs (id, command) overriding system value values (-1, '{true}')"),
           std::string("insert into pgfleet.jobs (id, command) overriding system value values (1000000, '{true}')"),
           std::string("insert into pgfleet.jobs (id, command) values (7, '{true}')"),
           std::string("insert into pgfleet.jobs overriding system value select * from pgfleet.jobs"),
       }) {
    std::string err = alice.ErrorOf(sql);
    EXPECT_TRUE(err.find("permission denied for table jobs") != std::string::npos ||
                err.find("cannot insert a non-DEFAULT value into column \"id\"") != std::string::npos)
        << sql << ": " << err;
  }
  EXPECT_EQ(Sql(db).Num("select count(*) from pgfleet.jobs"), 0);
  // Without an id it works, and the id is the next of the identity.
  long long id = alice.Num("insert into pgfleet.jobs (command) values ('{true}') returning id");
  EXPECT_GT(id, 0);
}

// Submitting to a formation that does not exist yet creates it, owned by the
// submitter (it used to fail for every submitter: the insert trigger, running
// as the schema's owner, made the schema's owner the new formation's owner,
// which the template rule refused), and never depends on another one's name.
TEST(NewFormation, ASubmitterOwnsTheFormationItsJobCreates) {
  TestDatabase db;
  Sql owner(db);
  std::string bob_login = db.CreateLogin("bob", {"pgfleet_submitter"});
  Sql bob(db.DsnAs(bob_login));
  EXPECT_EQ(bob.ErrorOf("insert into pgfleet.jobs (command, formation) values ('{true}', 'nightly')"), "");
  EXPECT_EQ(bob.ErrorOf("select pgfleet.submit(array['true'], formation => 'weekly')"), "");
  EXPECT_EQ(bob.ErrorOf("insert into pgfleet.jobs (command, formation)"
                        " select '{true}', 'f' || g from generate_series(1, 3) g"),
            "");
  EXPECT_EQ(owner.Str("select string_agg(name || ':' || (owner = $1), ' ' order by name)"
                      " from pgfleet.formations where name <> 'default'",
                      bob_login),
            "f1:true f2:true f3:true nightly:true weekly:true");
  // With 'default' renamed, a job without a formation makes a new 'default'.
  owner.Exec("update pgfleet.formations set name = 'old-default' where name = 'default'");
  EXPECT_EQ(bob.ErrorOf("insert into pgfleet.jobs (command) values ('{true}')"), "");
  EXPECT_EQ(owner.Num("select count(*) from pgfleet.jobs"), 6);
}

}  // namespace
}  // namespace pgfleet::integration
