// Job files in SQL (migration 0036, sql/016_job_files.sql, docs/files.md):
// every rule of pgfleet.spec_files refuses naming itself and changes
// nothing, with the same words as the C++ model hostd checks them with
// again; the spec sent to hostd carries the files; a formation's template
// files reach its replicas, and changing them makes a version.

#include <gtest/gtest.h>

#include "core/model/job_spec.h"
#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

class JobFilesTest : public ::testing::Test {
 protected:
  // The error of inserting a job with files $1, "" when it was accepted.
  std::string InsertError(const std::string& files) {
    return sql_.ErrorOf("insert into pgfleet.jobs (command, files) values ('{true}', $1::jsonb)",
                        files);
  }
  std::string CreateFormationError(const std::string& files) {
    return sql_.ErrorOf(
        "insert into pgfleet.formations (name, kind, replicas, command, files) "
        "values ('f' || md5(random()::text), 'service', 0, '{true}', $1::jsonb)",
        files);
  }

  TestDatabase db_;
  Sql sql_{db_};
};

std::string OneFile(const std::string& path, const std::string& file) {
  return json{{path, json::parse(file)}}.dump();
}

TEST_F(JobFilesTest, TwoMiBOfFilesAreRefusedNamingTheRuleAndOneMiBIsAccepted) {
  const std::string rule = "files must hold at most 1 MiB in all";
  json two;
  two["a.txt"] = {{"content", std::string(1 << 20, 'a')}};
  two["b.txt"] = {{"content", std::string(1 << 20, 'b')}};
  EXPECT_NE(std::string::npos, InsertError(two.dump()).find(rule)) << InsertError(two.dump());
  EXPECT_NE(std::string::npos, CreateFormationError(two.dump()).find(rule));
  json over;
  over["a"] = {{"content", std::string((1 << 20) + 1, 'a')}};
  EXPECT_NE(std::string::npos, InsertError(over.dump()).find(rule));
  EXPECT_EQ(0, sql_.Num("select count(*) from pgfleet.jobs"));
  EXPECT_EQ(0, sql_.Num("select count(*) from pgfleet.job_events"));
  // Exactly 1 MiB, in two files; base64 counts its decoded bytes (4/3 more text).
  json full;
  full["a"] = {{"content", std::string(1 << 19, 'a')}};
  full["b"] = {{"content", model::Base64(std::string(1 << 19, '\x01'))}, {"base64", true}};
  EXPECT_EQ("", InsertError(full.dump()));
  EXPECT_EQ(1 << 20, sql_.Num("select pgfleet.files_bytes(files) from pgfleet.jobs"));
  // The C++ rules agree (hostd checks again).
  EXPECT_NO_THROW(model::ParseJobFiles(full));
  try {
    model::ParseJobFiles(two);
    ADD_FAILURE() << "2 MiB accepted";
  } catch (const model::SpecError& e) {
    EXPECT_NE(std::string::npos, std::string(e.what()).find(rule)) << e.what();
    EXPECT_EQ("files", e.field());
  }
}

TEST_F(JobFilesTest, EveryRuleRefusesNamingItselfInSqlAndInTheModelAndChangesNothing) {
  struct Case {
    std::string files, rule;
  };
  const std::string relative = "files paths must be relative, no empty, . or .. components";
  const std::string mode = "files.*.mode must be octal 000-777 (no setuid, setgid, sticky)";
  const std::string text = "files.*.content must be text, or base64 with";
  json many = json::object();
  for (int i = 0; i < 65; ++i) many["f" + std::to_string(i)] = {{"content", ""}};
  const std::vector<Case> cases = {
      {"[]", "files must be an object of at most 64 files"},
      {"\"run.sh\"", "files must be an object of at most 64 files"},
      {R"({"a": "echo"})", "files must be an object of at most 64 files"},
      {many.dump(), "files must be an object of at most 64 files"},
      {OneFile("/etc/passwd", R"({"content": "x"})"), relative},
      {OneFile("../escape", R"({"content": "x"})"), relative},
      {OneFile("a/../../b", R"({"content": "x"})"), relative},
      {OneFile("a/..", R"({"content": "x"})"), relative},
      {OneFile("./a", R"({"content": "x"})"), relative},
      {OneFile("a//b", R"({"content": "x"})"), relative},
      {OneFile("a/", R"({"content": "x"})"), relative},
      {OneFile("", R"({"content": "x"})"), relative},
      {OneFile(".", R"({"content": "x"})"), relative},
      {OneFile("a\nb", R"({"content": "x"})"), "files paths must not hold control characters"},
      {OneFile(std::string(256, 'p'), R"({"content": "x"})"),
       "files paths must be at most 255 bytes"},
      {OneFile("a", R"({"content": 5})"), "files.*.content must be a string"},
      {OneFile("a", R"({"content": null})"), "files.*.content must be a string"},
      {OneFile("a", R"({"mode": "0644"})"), "files.*.content must be a string"},
      {OneFile("a", R"({"content": ["x"]})"), "files.*.content must be a string"},
      {OneFile("a", R"({"content": "bell\u0007"})"), text},
      {OneFile("a", R"({"content": "not base64!", "base64": true})"), text},
      {OneFile("a", R"({"content": "abc", "base64": true})"), text},
      {OneFile("a", R"({"content": "x", "mode": "4755"})"), mode},
      {OneFile("a", R"({"content": "x", "mode": "1777"})"), mode},
      {OneFile("a", R"({"content": "x", "mode": "0800"})"), mode},
      {OneFile("a", R"({"content": "x", "mode": "-755"})"), mode},
      {OneFile("a", R"({"content": "x", "mode": 493})"), mode},
      {OneFile("a", R"({"content": "x", "mode": ""})"), mode},
      {OneFile("a", R"({"content": "x", "base64": "yes"})"), "files.*.base64 must be true or false"},
      {OneFile("a", R"({"content": "x", "owner": "root"})"),
       "files.* may hold only content, mode and base64"},
      {OneFile("a", R"({"content": "x", "uid": 0})"),
       "files.* may hold only content, mode and base64"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.files.substr(0, 200));
    std::string err = InsertError(c.files);
    EXPECT_NE(std::string::npos, err.find(c.rule)) << err;
    err = CreateFormationError(c.files);
    EXPECT_NE(std::string::npos, err.find(c.rule)) << err;
    try {
      model::ParseJobFiles(json::parse(c.files));
      ADD_FAILURE() << "the model accepts it";
    } catch (const model::SpecError& e) {
      EXPECT_NE(std::string::npos, std::string(e.what()).find(c.rule)) << e.what();
    }
  }
  // A NUL cannot be in a jsonb string at all.
  EXPECT_NE("", InsertError(R"({"a": {"content": "x\u0000y"}})"));
  EXPECT_EQ(0, sql_.Num("select count(*) from pgfleet.jobs"));
  // Only the formation every database has (migration 0001) is left.
  EXPECT_EQ(0, sql_.Num("select count(*) from pgfleet.formations where name <> 'default'"));
  // And what is fine: nested paths, dots inside names, modes with and without the 0.
  const std::string good =
      R"({"run.sh": {"content": "#!/bin/sh\necho hi\n", "mode": "0755"},
          "conf/app.ini": {"content": "a = 1\r\n\tb = 2\n"}, "..hidden": {"content": ""},
          "a/b.c/d...e": {"content": "ünïcode", "mode": "600"},
          "bin": {"content": "AAEC/w==", "base64": true, "mode": "0700"}})";
  EXPECT_EQ("", InsertError(good));
  EXPECT_EQ("", CreateFormationError(good));
  EXPECT_EQ(5u, model::ParseJobFiles(json::parse(good)).size());
}

TEST_F(JobFilesTest, SubmitTakesFilesAndTheSpecSentToHostdCarriesThem) {
  const std::string files = R"({"run.sh": {"content": "echo ran\n", "mode": "0755"}})";
  const long long id = sql_.Num(
      "select pgfleet.submit(array['sh', './run.sh'], files => $1::jsonb)", files);
  auto spec = json::parse(sql_.Str(
      "select pgfleet.job_spec_json(j)::text from pgfleet.jobs j where id = $1", id));
  EXPECT_EQ(json::parse(files), spec["files"]);
  auto parsed = model::ParseJobSpec(spec);
  ASSERT_EQ(1u, parsed.files.size());
  EXPECT_EQ(0755, parsed.files.at("run.sh").mode);
  EXPECT_EQ("echo ran\n", parsed.files.at("run.sh").content);
  // Round trip: what the model writes, the database takes.
  EXPECT_EQ("", InsertError(model::ToJson(parsed.files).dump()));
  // A job without files sends null.
  const long long none = sql_.Num("select pgfleet.submit(array['true'])");
  EXPECT_TRUE(json::parse(sql_.Str("select pgfleet.job_spec_json(j)::text from pgfleet.jobs j "
                                   "where id = $1", none))["files"]
                  .is_null());
}

TEST_F(JobFilesTest, TemplateFilesReachReplicasAndAChangeMakesAVersionThatRevertTakesBack) {
  sql_.Exec(
      "insert into pgfleet.formations (name, kind, replicas, command, files) values "
      "('web', 'service', 0, '{sh,./run.sh}', '{\"run.sh\": {\"content\": \"v1\"}}')");
  const int id = static_cast<int>(sql_.Num("select id from pgfleet.formations where name = 'web'"));
  EXPECT_EQ(1, sql_.Num("select pgfleet.create_replicas($1, 1)", id));
  EXPECT_EQ("v1", sql_.Str("select files -> 'run.sh' ->> 'content' from pgfleet.jobs"));
  EXPECT_EQ(2, sql_.Num("select pgfleet.update_formation('web', "
                        "'{\"files\": {\"run.sh\": {\"content\": \"v2\", \"mode\": \"0755\"}}}')"));
  EXPECT_EQ("files", sql_.Str("select array_to_string(changed, ',') from pgfleet.formation_versions "
                              "where version = 2"));
  EXPECT_EQ("v2", sql_.Str("select template -> 'files' -> 'run.sh' ->> 'content' "
                           "from pgfleet.formation_versions where version = 2"));
  // A bad template change is refused naming the rule and makes no version.
  EXPECT_NE(std::string::npos,
            sql_.ErrorOf("select pgfleet.update_formation('web', "
                         "'{\"files\": {\"/etc/shadow\": {\"content\": \"x\"}}}')")
                .find("files paths must be relative"));
  EXPECT_EQ(2, sql_.Num("select max(version) from pgfleet.formation_versions"));
  sql_.Exec("select pgfleet.revert('web', 1)");
  EXPECT_EQ("v1", sql_.Str("select files -> 'run.sh' ->> 'content' from pgfleet.formations "
                           "where name = 'web'"));
  // Removing the files is a change too.
  sql_.Exec("select pgfleet.update_formation('web', '{\"files\": null}')");
  EXPECT_EQ(1, sql_.Num("select count(*) from pgfleet.formations "
                        "where name = 'web' and files is null"));
  EXPECT_EQ("files", sql_.Str("select array_to_string(changed, ',') "
                              "from pgfleet.formation_versions where formation_id = $1 "
                              "order by version desc limit 1",
                              id));
}

TEST_F(JobFilesTest, OnlyTheOwnerAndOperatorsSeeAJobsFiles) {
  const std::string alice = db_.CreateLogin("alice", {"pgfleet_submitter"});
  const std::string bob = db_.CreateLogin("bob", {"pgfleet_submitter"});
  const std::string rita = db_.CreateLogin("rita", {"pgfleet_reader"});
  Sql a(db_.DsnAs(alice)), b(db_.DsnAs(bob)), r(db_.DsnAs(rita));
  const long long id = a.Num(
      "select pgfleet.submit(array['true'], files => '{\"secret.ini\": {\"content\": \"pw\"}}')");
  EXPECT_EQ("pw", a.Str("select files -> 'secret.ini' ->> 'content' from pgfleet.visible_jobs "
                        "where id = $1", id));
  EXPECT_EQ("", r.Str("select files::text from pgfleet.visible_jobs where id = $1", id));
  EXPECT_EQ(0, b.Num("select count(*) from pgfleet.visible_jobs where id = $1", id));
  EXPECT_EQ(0, b.Num("select count(*) from pgfleet.jobs where files is not null"));  // row security
}

}  // namespace
}  // namespace pgfleet::integration
