#include <gtest/gtest.h>

#include <string>

#include "core/db/connection.h"

namespace pgfleet::db {
namespace {

bool Has(const std::string& dsn, const std::string& part) {
  return (" " + dsn).find(" " + part) != std::string::npos;
}

TEST(DaemonDsn, AddsTimeoutsAndKeepalivesTheDsnDoesNotSet) {
  std::string d = DaemonDsn("host=db1 port=5433 dbname=fleet");
  EXPECT_TRUE(Has(d, "host='db1'")) << d;
  EXPECT_TRUE(Has(d, "port='5433'")) << d;
  EXPECT_TRUE(Has(d, "dbname='fleet'")) << d;
  for (const char* p : {"connect_timeout=5", "keepalives=1", "keepalives_idle=5",
                        "keepalives_interval=2", "keepalives_count=3", "tcp_user_timeout=10000"})
    EXPECT_TRUE(Has(d, p)) << p << " in " << d;
}

TEST(DaemonDsn, KeepsWhatTheDsnSetsAndReadsUris) {
  std::string d = DaemonDsn(
      "postgresql://u@h1:5432,h2:5433/fleet?connect_timeout=20&target_session_attrs=read-write");
  EXPECT_TRUE(Has(d, "connect_timeout='20'")) << d;
  EXPECT_FALSE(Has(d, "connect_timeout=5")) << d;
  EXPECT_TRUE(Has(d, "host='h1,h2'")) << d;
  EXPECT_TRUE(Has(d, "port='5432,5433'")) << d;
  EXPECT_TRUE(Has(d, "target_session_attrs='read-write'")) << d;
  EXPECT_TRUE(Has(d, "user='u'")) << d;
}

TEST(DaemonDsn, QuotesValuesAndLeavesAnEmptyDsnToThePgVariables) {
  std::string d = DaemonDsn(R"(password='it\'s \\ here' host=x)");
  EXPECT_NE(std::string::npos, d.find(R"(password='it\'s \\ here')")) << d;
  std::string e = DaemonDsn("");
  EXPECT_EQ(std::string::npos, e.find("host=")) << e;
  EXPECT_TRUE(Has(e, "tcp_user_timeout=10000")) << e;
  // A DSN libpq cannot parse is passed on as it is, for the connection to report.
  EXPECT_EQ("host=x port", DaemonDsn("host=x port"));
}

}  // namespace
}  // namespace pgfleet::db
