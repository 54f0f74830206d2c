// The SQL front door against one ordinary login (issue 34): what a submitter
// may not set, what it gets when it submits to a formation that is not there
// yet, and idempotency keys that are its own.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

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

// Keys are per owner: two owners may use the same key, neither learns of the
// other's, and a key's length is a named rule.
TEST(IdempotencyKey, KeysArePerOwnerAndTheirLengthIsARule) {
  TestDatabase db;
  Sql owner(db);
  Sql alice(db.DsnAs(db.CreateLogin("alice", {"pgfleet_submitter"})));
  Sql bob(db.DsnAs(db.CreateLogin("bob", {"pgfleet_submitter"})));
  long long a = alice.Num("select pgfleet.submit(array['true'], idempotency_key => 'nightly-1')");
  long long b = bob.Num("select pgfleet.submit(array['true'], idempotency_key => 'nightly-1')");
  EXPECT_NE(a, b);
  EXPECT_EQ(alice.Num("select pgfleet.submit(array['true'], idempotency_key => 'nightly-1')"), a);
  EXPECT_EQ(bob.Num("select pgfleet.submit(array['true'], idempotency_key => 'nightly-1')"), b);
  // A plain insert of a key its owner used is refused; another owner's is not.
  std::string err = alice.ErrorOf(
      "insert into pgfleet.jobs (command, idempotency_key) values ('{true}', 'nightly-1')");
  EXPECT_NE(err.find("idempotency_key must be unique per owner"), std::string::npos) << err;
  EXPECT_EQ(owner.Num("select count(*) from pgfleet.jobs"), 2);
  for (const std::string& key : {std::string(300, 'k'), std::string(9000, 'k'), std::string()}) {
    err = alice.ErrorOf("select pgfleet.submit(array['true'], idempotency_key => $1)", key);
    EXPECT_NE(err.find("idempotency_key must be 1-256 bytes"), std::string::npos) << err.substr(0, 200);
  }
  EXPECT_EQ(owner.Num("select count(*) from pgfleet.jobs"), 2);
}

}  // namespace
}  // namespace pgfleet::integration
