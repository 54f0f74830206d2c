// The jobs insert trigger against the real server: a job's unknown
// formation is created as batch and a bad name refused, and a one-row
// statement and a statement of many rows are held to the same rules with the
// same words. What it notifies: schema_notify_test.cpp.

#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "core/model/constants.h"
#include "schema_probes.h"

namespace pgfleet::testing_schema {
namespace {

TEST(JobsTrigger, UnknownFormationIsCreatedAsBatch) {
  TestDatabase db;
  ASSERT_EQ(
      ErrorOf(db,
              "insert into pgfleet.jobs (command, formation) values (array['true'], 'nightly')"),
      "");
  EXPECT_EQ(db.Scalar("select kind from pgfleet.formations where name = 'nightly'"), "batch");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs where formation = 'nightly'"), 1);
  // A second job into it reuses the formation.
  ASSERT_EQ(
      ErrorOf(db,
              "insert into pgfleet.jobs (command, formation) values (array['true'], 'nightly')"),
      "");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.formations where name = 'nightly'"), 1);
}

TEST(JobsTrigger, BadFormationNameIsRejectedAndCreatesNoJob) {
  TestDatabase db;
  long long formations = db.Count("select count(*) from pgfleet.formations");
  std::string err = ErrorOf(
      db, "insert into pgfleet.jobs (command, formation) values (array['true'], 'bad name!')");
  EXPECT_NE(err.find("formation name must be 1-100 of A-Z a-z 0-9 . _ -"), std::string::npos)
      << err;
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 0);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.formations"), formations);
}

// The insert trigger checks a one-row statement in PL/pgSQL expressions and
// a statement of many rows a rule at a time (sql/016_job_insert.sql): the same
// row must be refused with the same message either way, and a good one
// accepted the same way.
TEST(JobsTrigger, OneRowAndManyRowsAreHeldToTheSameRules) {
  TestDatabase db;
  // A deleted formation (with a job, so that its row is kept).
  ASSERT_EQ(
      ErrorOf(db, "insert into pgfleet.jobs (command, formation) values (array['a'], 'gone')"), "");
  ASSERT_EQ(ErrorOf(db, "select pgfleet.delete_formation('gone')"), "");
  // Job ids differ between the two statements; the rest of the message must not.
  auto without_ids = [](std::string text) {
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      out += text[i];
      if (text.compare(i, 4, "job ") == 0 && i + 4 < text.size() &&
          std::isdigit(static_cast<unsigned char>(text[i + 4]))) {
        out += "ob #";
        i += 3;
        while (i + 1 < text.size() && std::isdigit(static_cast<unsigned char>(text[i + 1]))) ++i;
      }
    }
    return out;
  };
  struct Case {
    std::string columns, good, bad, words;
  };
  for (const Case& c : std::vector<Case>{
           {"state", "'pending'", "'succeeded'", "state is set by pgfleet"},
           {"host_id", "null", "'h1'", "host_id is set by pgfleet"},
           {"failures", "0", "5", "failures is set by pgfleet"},
           {"requeue_on_stop", "false", "true", "requeue_on_stop is set by pgfleet"},
           // (An admin's job defaults to network host, a privileged feature.)
           {"privileged, network, run_as", "false, 'none', null", "false, 'none', 'root'",
            "runs the job as root"},
           {"privileged, network", "false, 'none'", "false, 'host'", "network host"},
           {"privileged, network, rootfs", "false, 'none', 'busybox'", "false, 'none', '/'",
            "is a path"},
           {"env", "'{}'::jsonb", "'{\"=x\": \"y\"}'::jsonb", "env names must be non-empty"},
           {"run_as", "null", "repeat('u', 5000)", "user must be at most"},
           {"formation", "'default'", "'gone'", "formation \"gone\" was deleted"},
       }) {
    const std::string one = "insert into pgfleet.jobs (command, " + c.columns +
                            ") values (array['true'], " + c.bad + ")";
    const std::string many = "insert into pgfleet.jobs (command, " + c.columns +
                             ") values (array['true'], " + c.good + "), (array['true'], " + c.bad +
                             "), (array['true'], " + c.good + ")";
    const std::string one_error = ErrorOf(db, one);
    const std::string many_error = ErrorOf(db, many);
    EXPECT_NE(one_error.find(c.words), std::string::npos) << one << ": " << one_error;
    EXPECT_EQ(without_ids(one_error.substr(0, one_error.find('\n'))),
              without_ids(many_error.substr(0, many_error.find('\n'))))
        << c.columns;
    // The good value is good in both forms.
    EXPECT_EQ(ErrorOf(db, "insert into pgfleet.jobs (command, " + c.columns +
                              ") values (array['true'], " + c.good + ")"),
              "")
        << c.columns;
  }
  // What was refused wrote nothing; what was accepted has its created event
  // (and the deleted formation's job).
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 11);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'created'"), 11);
  // A command over the limit, the exact check behind the cheap one.
  const std::string long_command = "(select array_agg('x'::text) from generate_series(1, " +
                                   std::to_string(model::kMaxCommandArgs + 1) + "))";
  const std::string one_error =
      ErrorOf(db, "insert into pgfleet.jobs (command) values (" + long_command + ")");
  EXPECT_NE(one_error.find("command must have at most"), std::string::npos) << one_error;
  EXPECT_EQ(without_ids(one_error.substr(0, one_error.find('\n'))), without_ids([&] {
              std::string e =
                  ErrorOf(db, "insert into pgfleet.jobs (command) values (array['a']), (" +
                                  long_command + ")");
              return e.substr(0, e.find('\n'));
            }()));
  // Unknown formations are created by both, once each.
  ASSERT_EQ(ErrorOf(db, "insert into pgfleet.jobs (command, formation) values (array['a'], 'f1')"),
            "");
  ASSERT_EQ(ErrorOf(db,
                    "insert into pgfleet.jobs (command, formation) values (array['a'], 'f2'), "
                    "(array['b'], 'f2'), (array['c'], 'f1')"),
            "");
  EXPECT_EQ(db.Scalar("select string_agg(name || ':' || kind, ',' order by name) "
                      "from pgfleet.formations where name in ('f1', 'f2')"),
            "f1:batch,f2:batch");
  EXPECT_EQ(db.Count("select count(*) from pgfleet.jobs"), 15);
  EXPECT_EQ(db.Count("select count(*) from pgfleet.job_events where kind = 'created'"), 15);
}

}  // namespace
}  // namespace pgfleet::testing_schema
