// Facts that C++ (core/model/constants.h, core/model/job_spec.h) and SQL
// (migrations/, sql/) must agree on, each defined once per side: checked here
// against the live schema, so changing one side alone fails a test.

#include "core/model/constants.h"
#include "core/model/driver_kind.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/model/job_spec.h"
#include "tests/support/test_support.h"

namespace pgfleet {
namespace {

using testing::TestDatabase;

TEST(Constants, SqlFactsEqualTheCppConstants) {
  TestDatabase db;
  EXPECT_EQ(db.Count("select pgfleet.lock_class()"), model::kLockClass);
  EXPECT_EQ(db.Scalar("select pgfleet.work_channel()"), model::kWorkChannel);
  EXPECT_EQ(db.Scalar("select pgfleet.job_channel()"), model::kJobChannel);
  EXPECT_EQ(db.Scalar("select pgfleet.all_formations()"), model::kAllFormations);
  EXPECT_EQ(db.Count("select pgfleet.host_loss_limit()"), model::kHostLossLimit);
  EXPECT_EQ(db.Count("select pgfleet.idle_lock_key()"), model::kIdleLockKey);
  EXPECT_EQ(db.Count("select pgfleet.max_command_args()"), model::kMaxCommandArgs);
  EXPECT_EQ(db.Count("select pgfleet.max_command_bytes()"), model::kMaxCommandBytes);
  EXPECT_EQ(db.Count("select pgfleet.max_env_bytes()"), model::kMaxEnvBytes);
  EXPECT_EQ(db.Count("select pgfleet.max_constraints_bytes()"), model::kMaxConstraintsBytes);
  EXPECT_EQ(db.Count("select pgfleet.max_path_bytes()"), model::kMaxPathBytes);
  EXPECT_EQ(db.Count("select pgfleet.max_job_user_id()"), model::kMaxJobUserId);
}

TEST(Constants, DriverKindsAndWhatTheyIsolateAgreeWithTheCppTypes) {
  TestDatabase db;
  std::string names;
  for (auto kind : {model::DriverKind::kProcess, model::DriverKind::kContainer,
                    model::DriverKind::kSim}) {
    const std::string name = model::DriverKindName(kind);
    names += (names.empty() ? "" : ",") + name;
    EXPECT_EQ(db.Scalar("select pgfleet.driver_isolates('" + name + "')::text"),
              model::CapabilitiesOf(kind).isolates ? "true" : "false")
        << name;
    EXPECT_EQ(model::ParseDriverKind(name), kind);
  }
  EXPECT_EQ(db.Scalar("select array_to_string(pgfleet.driver_kinds(), ',')"), names);
  EXPECT_FALSE(model::ParseDriverKind("kvm"));
}

TEST(Constants, HostTtlDefaultEqualsTheCppConstant) {
  TestDatabase db;
  const std::string ttl = "select extract(epoch from pgfleet.host_ttl())::bigint";
  // As migrated (settings holds the initial value) and with the setting unset.
  EXPECT_EQ(db.Count(ttl), model::kDefaultHostTtlSeconds);
  db.Scalar("delete from pgfleet.settings where name = 'host_ttl_seconds'");
  EXPECT_EQ(db.Count(ttl), model::kDefaultHostTtlSeconds);
  // The setting still wins when set.
  db.Scalar("insert into pgfleet.settings (name, value) values ('host_ttl_seconds', '4')");
  EXPECT_EQ(db.Count(ttl), 4);
}

// Each column default of `table`, evaluated by the server, as text.
std::map<std::string, std::string> ColumnDefaults(const TestDatabase& db,
                                                  const std::string& table) {
  auto conn = db.Connect();
  pqxx::work tx(*conn);
  std::map<std::string, std::string> out;
  for (const auto& row : tx.exec_params(
           "select column_name, column_default from information_schema.columns"
           " where table_schema = 'pgfleet' and table_name = $1 and column_default is not null",
           table)) {
    // The expression comes from the schema itself (e.g. '{}'::jsonb).
    auto value = tx.exec1("select (" + row[1].as<std::string>() + ")::text");
    out[row[0].as<std::string>()] = value[0].as<std::string>();
  }
  return out;
}

TEST(Constants, JobColumnDefaultsEqualTheCppJobSpecDefaults) {
  TestDatabase db;
  const model::JobSpec spec;  // every field at its C++ default
  const std::map<std::string, std::string> want = {
      {"formation", spec.formation},
      {"cpu", std::to_string(spec.cpu)},
      {"memory", std::to_string(spec.memory)},
      {"env", nlohmann::json(spec.env).dump()},
      {"constraints", nlohmann::json(spec.constraints).dump()},
      {"priority", std::to_string(spec.priority)},
      {"max_attempts", std::to_string(spec.max_attempts)},
      {"network", spec.network},
      {"pids_max", std::to_string(spec.pids_max)},
      {"cpu_hard_limit", spec.cpu_hard_limit ? "true" : "false"},
      {"stop_grace_seconds", std::to_string(spec.stop_grace_seconds)},
  };
  EXPECT_EQ(spec.cpu, model::kDefaultCpu);
  EXPECT_EQ(spec.memory, model::kDefaultMemory);
  EXPECT_EQ(spec.priority, model::kDefaultPriority);
  EXPECT_EQ(spec.pids_max, model::kDefaultPidsMax);
  EXPECT_EQ(spec.stop_grace_seconds, model::kDefaultStopGraceSeconds);

  auto jobs = ColumnDefaults(db, "jobs");
  auto formations = ColumnDefaults(db, "formations");
  int template_columns = 0;
  for (const auto& [column, value] : want) {
    SCOPED_TRACE(column);
    ASSERT_EQ(jobs.count(column), 1u) << "pgfleet.jobs." << column << " has no default";
    EXPECT_EQ(jobs[column], value);
    if (formations.count(column)) {  // the template's columns, and a sysbatch job's max_attempts
      EXPECT_EQ(formations[column], value);
      ++template_columns;
    }
  }
  // cpu, memory, env, constraints, priority, network, pids_max, cpu_hard_limit,
  // stop_grace_seconds (rootfs and run_as have no default: null), and
  // max_attempts (migration 0030: a sysbatch formation's jobs take it)
  EXPECT_EQ(template_columns, 10);
}

}  // namespace
}  // namespace pgfleet
