// A formation's job template is a whole job (issue 9): the template columns
// (pgfleet.template_columns()) exist in pgfleet.jobs and pgfleet.formations
// with the same type, default and named rules; every field of the C++ job
// spec that describes how a job runs is one of them; and a service's replicas
// carry every template value.

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "core/model/job_spec.h"
#include "tests/support/test_support.h"

namespace pgfleet {
namespace {

using testing::TestDatabase;

std::set<std::string> TemplateColumns(const TestDatabase& db) {
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  std::set<std::string> out;
  for (const auto& r : tx.exec("select unnest(pgfleet.template_columns())")) {
    out.insert(r[0].as<std::string>());
  }
  return out;
}

// "type | default | rules" of a column: its type, default, and its one-column
// CHECK constraints by name and definition, its domain's and its table's.
std::string ColumnShape(const TestDatabase& db, const std::string& table, const std::string& col) {
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  auto r = tx.exec_params1(
      "select format_type(a.atttypid, a.atttypmod) || ' | ' || "
      "       coalesce(pg_get_expr(d.adbin, d.adrelid), 'no default') || ' | ' || "
      "       coalesce((select string_agg(c.conname || ': ' || pg_get_constraintdef(c.oid), '; '"
      "                                   order by c.conname)"
      "                   from pg_constraint c"
      "                  where c.contype = 'c' and (c.contypid = a.atttypid or "
      "c.conrelid = a.attrelid and c.conkey = array[a.attnum])), 'no rules')"
      "  from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = "
      "a.attnum"
      " where a.attrelid = ('pgfleet.' || $1)::regclass and a.attname = $2 and not a.attisdropped",
      table, col);
  return r[0].as<std::string>();
}

TEST(FormationTemplate, EveryTemplateColumnHasTheSameTypeDefaultAndRulesInJobsAndFormations) {
  TestDatabase db;
  for (const auto& col : TemplateColumns(db)) {
    if (col == "command") continue;  // a batch formation has no command: nullable there only
    EXPECT_EQ(ColumnShape(db, "jobs", col), ColumnShape(db, "formations", col)) << col;
  }
}

TEST(FormationTemplate, EveryRunFieldOfTheJobSpecIsATemplateColumn) {
  TestDatabase db;
  auto columns = TemplateColumns(db);
  // Fields of a job that are about its place in a queue, not how it runs; and
  // `privileged`, which is who wrote it (formations.privileged, set by pgfleet).
  const std::set<std::string> not_template = {"formation", "max_attempts", "privileged"};
  const nlohmann::json spec = model::ToJson(model::JobSpec{});
  for (auto it = spec.begin(); it != spec.end(); ++it) {
    const std::string& field = it.key();
    if (not_template.count(field)) continue;
    const std::string column = field == "user" ? "run_as" : field;  // `user` is reserved in SQL
    EXPECT_TRUE(columns.count(column)) << "job spec field " << field << " is not in the template";
  }
}

TEST(FormationTemplate, ReplicasCarryEveryTemplateValue) {
  TestDatabase db;
  db.Scalar(
      "insert into pgfleet.formations (name, kind, replicas, command, env, cpu, memory, "
      "constraints, priority, rootfs, run_as, network, pids_max, cpu_hard_limit, "
      "stop_grace_seconds) values ('web', 'service', 0, '{./server,--port,0}', '{\"A\":\"1\"}', "
      "250, 96, '{\"zone\":\"b\"}', 70, 'busybox', 'daemon', 'none', 77, true, 3)");
  EXPECT_EQ("2", db.Scalar("select pgfleet.create_replicas(id, 2) from pgfleet.formations "
                           "where name = 'web'"));
  EXPECT_EQ("2", db.Scalar("select count(*) from pgfleet.jobs j join pgfleet.formations f "
                           "on f.name = j.formation where f.name = 'web' and "
                           "(j.command, j.env, j.cpu, j.memory, j.constraints, j.priority, "
                           "j.rootfs, j.run_as, j.network, j.pids_max, j.cpu_hard_limit, "
                           "j.stop_grace_seconds) = (f.command, f.env, f.cpu, f.memory, "
                           "f.constraints, f.priority, f.rootfs, f.run_as, f.network, "
                           "f.pids_max, f.cpu_hard_limit, f.stop_grace_seconds)"));
  // The spec hostd receives says the same.
  EXPECT_EQ("busybox daemon none 77 true 3",
            db.Scalar("select concat_ws(' ', s->>'rootfs', s->>'user', s->>'network', "
                      "s->>'pids_max', s->>'cpu_hard_limit', s->>'stop_grace_seconds') "
                      "from (select pgfleet.job_spec(j) s from pgfleet.jobs j "
                      "where formation = 'web' limit 1) x"));
}

// What the scheduler sends hostd (pgfleet.job_spec_json, as text) parses, as
// hostd parses it, to the job's columns, and says what pgfleet.job_spec does.
TEST(JobSpecJson, TheTextSentToHostdParsesToTheJobsColumns) {
  TestDatabase db;
  std::string id = db.Scalar(
      "insert into pgfleet.jobs (command, env, cpu, memory, constraints, priority, max_attempts, "
      "rootfs, run_as, network, pids_max, cpu_hard_limit, stop_grace_seconds, log_max_files, "
      "log_max_file_mb) values (array['sh', '-c', 'echo \"hi\" \u00e9\\n'], "
      "'{\"A\": \"x\\\"y\", \"B\": \"\u00fc\"}', 250, 96, '{\"zone\": \"b\"}', 70, 3, "
      "'busybox', 'daemon', 'none', 77, true, 3, 4, 2) returning id");
  std::string text = db.Scalar(
      "select pgfleet.job_spec_json(j)::text from pgfleet.jobs j "
      "where id = " +
      id);
  model::JobSpec s = model::ParseJobSpec(nlohmann::json::parse(text));
  EXPECT_EQ((std::vector<std::string>{"sh", "-c", "echo \"hi\" \u00e9\\n"}), s.command);
  EXPECT_EQ((std::map<std::string, std::string>{{"A", "x\"y"}, {"B", "\u00fc"}}), s.env);
  EXPECT_EQ(250, s.cpu);
  EXPECT_EQ(96, s.memory);
  EXPECT_EQ((std::map<std::string, std::string>{{"zone", "b"}}), s.constraints);
  EXPECT_EQ(70, s.priority);
  EXPECT_EQ(3, s.max_attempts);
  EXPECT_EQ("default", s.formation);
  EXPECT_EQ("busybox", s.rootfs);
  EXPECT_EQ("daemon", s.user);
  EXPECT_EQ("none", s.network);
  EXPECT_EQ(77, s.pids_max);
  EXPECT_TRUE(s.cpu_hard_limit);
  EXPECT_EQ(3, s.stop_grace_seconds);
  EXPECT_EQ(4, s.log_max_files);
  EXPECT_EQ(2, s.log_max_file_mb);
  EXPECT_EQ("t", db.Scalar("select pgfleet.job_spec_json(j)::jsonb = pgfleet.job_spec(j) "
                           "from pgfleet.jobs j where id = " +
                           id));
}

TEST(FormationTemplate, CreateReplicasMakesNothingForABatchFormationOrAZeroCount) {
  TestDatabase db;
  EXPECT_EQ("0", db.Scalar("select pgfleet.create_replicas(id, 3) from pgfleet.formations "
                           "where name = 'default'"));
  db.Scalar(
      "insert into pgfleet.formations (name, kind, replicas, command) "
      "values ('svc', 'service', 0, '{true}')");
  EXPECT_EQ("0", db.Scalar("select pgfleet.create_replicas(id, 0) from pgfleet.formations "
                           "where name = 'svc'"));
  EXPECT_EQ("0", db.Scalar("select count(*) from pgfleet.jobs"));
}

TEST(FormationTemplate, ABadTemplateValueIsRefusedNamingTheRule) {
  TestDatabase db;
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  try {
    tx.exec0(
        "insert into pgfleet.formations (name, kind, command, network) "
        "values ('x', 'service', '{true}', 'overlay')");
    FAIL() << "network 'overlay' accepted";
  } catch (const pqxx::check_violation& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find("network must be 'host', 'none' or 'bridge'"))
        << e.what();
  }
}

}  // namespace
}  // namespace pgfleet
