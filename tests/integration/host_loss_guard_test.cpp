// pgfleet.sweep_lost_hosts' guards (issue 41), called as a scheduler calls
// it, with heartbeats set back by hand: silence counts from the database's
// and the sweeping session's start, a sweep that would lose a large share of
// the hosts at once loses none and says so, losses are rate-limited, and
// settings are checked when written.

#include <gtest/gtest.h>

#include <string>

#include "tests/integration/sql_client.h"

namespace pgfleet::integration {
namespace {

// `n` hosts h1..hn, each running one job, every heartbeat fresh.
void HostsWithAJobEach(Sql& sql, int n) {
  for (int i = 1; i <= n; ++i) {
    std::string h = "h" + std::to_string(i);
    sql.RegisterHost(h, 1000, 1000);
    long long job = sql.Num("select pgfleet.submit(array['true'])");
    sql.Exec("select count(*) from pgfleet.assign_jobs(jsonb_build_array(jsonb_build_object("
             "'job', $1::bigint, 'host', $2::text)))",
             job, h);
  }
}

// Hosts h<first>..h<last> last heartbeated a minute ago.
void Silence(Sql& sql, int first, int last) {
  sql.Exec(
      "update pgfleet.host_heartbeats set last_seen = now() - interval '1 minute'"
      " where substr(host_id, 2)::int between $1 and $2",
      first, last);
}

// A sweep as a scheduler whose session has reached the database for long.
long long Sweep(Sql& sql) {
  return sql.Num("select count(*) from pgfleet.sweep_lost_hosts(10, '-infinity')");
}

TEST(HostLossGuard, TenOfTenSilentAtOnceAreHeldAndRecordedThenJudgedWhenHeartbeatsResume) {
  TestDatabase db;
  Sql sql(db);
  HostsWithAJobEach(sql, 10);
  Silence(sql, 1, 10);
  EXPECT_EQ(Sweep(sql), 0);
  EXPECT_EQ(Sweep(sql), 0);  // and again: a hold is one event, not one a sweep
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.hosts where state = 'lost'"), 0);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.jobs where state = 'assigned' and attempt = 1"),
            10);
  EXPECT_EQ(sql.Str("select held_hosts || '/' || of_hosts || ' ' || (held_since is not null)"
                    " from pgfleet.host_loss_guard"),
            "10/10 true");
  EXPECT_EQ(sql.Str("select string_agg(kind || ': ' || detail, '; ') from pgfleet.host_loss_events"),
            "held: 10 of 10 hosts missed heartbeats at once: treating it as a control-plane "
            "outage; none is declared lost until heartbeats resume (host_loss_guard_share 0.55, "
            "host_loss_guard_min_hosts 3)");
  EXPECT_EQ(sql.Str("select host_loss_held_hosts from pgfleet.cluster_summary"), "10");

  // Eight come back; the two still silent are a small share: judged as ever.
  sql.Exec("update pgfleet.host_heartbeats set last_seen = now() where host_id not in ('h1', 'h2')");
  EXPECT_EQ(Sweep(sql), 2);
  EXPECT_EQ(sql.Str("select string_agg(id, ',' order by id) from pgfleet.hosts where state = 'lost'"),
            "h1,h2");
  EXPECT_EQ(sql.Str("select held_since is null from pgfleet.host_loss_guard"), "t");
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.host_loss_events where kind = 'resumed'"
                    " and detail like 'heartbeats resumed after a hold of % s: 2 of 10 hosts still "
                    "silent, judged one by one'"),
            1);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.jobs where state = 'pending' and attempt = 1"), 2);
}

// Hosts cut off at once went silent at different points of their heartbeat
// interval: when the first pass the TTL, the rest have missed heartbeats for
// most of it. The guard counts those too.
TEST(HostLossGuard, HostsSilentForHalfTheTtlCountTowardsAMassLoss) {
  TestDatabase db;
  Sql sql(db);
  HostsWithAJobEach(sql, 10);
  sql.Exec("update pgfleet.host_heartbeats set last_seen = now() - interval '11 seconds'"
           " where host_id in ('h1', 'h2', 'h3')");
  sql.Exec("update pgfleet.host_heartbeats set last_seen = now() - interval '6 seconds'"
           " where host_id not in ('h1', 'h2', 'h3')");
  EXPECT_EQ(Sweep(sql), 0);
  EXPECT_EQ(sql.Num("select held_hosts from pgfleet.host_loss_guard"), 10);
  // The same three past the TTL while the others heartbeat: lost.
  sql.Exec("update pgfleet.host_heartbeats set last_seen = now() where host_id not in ('h1', 'h2', 'h3')");
  EXPECT_EQ(Sweep(sql), 3);
}

TEST(HostLossGuard, TwoOfTenSilentAreLostAsBefore) {
  TestDatabase db;
  Sql sql(db);
  HostsWithAJobEach(sql, 10);
  Silence(sql, 9, 10);
  EXPECT_EQ(Sweep(sql), 2);
  EXPECT_EQ(sql.Str("select string_agg(id, ',' order by id) from pgfleet.hosts where state = 'lost'"),
            "h10,h9");
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.host_loss_events"), 0);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.job_events where kind = 'lost'"), 2);
}

TEST(HostLossGuard, FewerSilentHostsThanTheMinimumAreLostEvenWhenTheyAreTheWholeFleet) {
  TestDatabase db;
  Sql sql(db);
  HostsWithAJobEach(sql, 2);
  Silence(sql, 1, 2);
  EXPECT_EQ(Sweep(sql), 2);  // two of two: a small fleet loses its hosts as before
}

TEST(HostLossGuard, TheShareAndMinimumAreSettingsAndAShareOfOneTurnsTheGuardOff) {
  TestDatabase db;
  Sql sql(db);
  HostsWithAJobEach(sql, 5);
  Silence(sql, 1, 5);
  sql.Exec("insert into pgfleet.settings (name, value) values ('host_loss_guard_min_hosts', '6')");
  EXPECT_EQ(Sweep(sql), 5);
  for (int i = 6; i <= 9; ++i) sql.RegisterHost("h" + std::to_string(i), 1000, 1000);
  Silence(sql, 6, 9);
  sql.Exec("update pgfleet.settings set value = '1' where name = 'host_loss_guard_min_hosts'");
  EXPECT_EQ(Sweep(sql), 0);  // 4 of 4 not lost: held
  sql.Exec("insert into pgfleet.settings (name, value) values ('host_loss_guard_share', '1')");
  EXPECT_EQ(Sweep(sql), 4);
}

TEST(HostLossGuard, LossesAreRateLimitedLongestSilentFirst) {
  TestDatabase db;
  Sql sql(db);
  for (int i = 1; i <= 30; ++i) sql.RegisterHost("h" + std::to_string(i), 1000, 1000);
  // 12 of 30 silent (under the guard's share), h1 the longest.
  sql.Exec(
      "update pgfleet.host_heartbeats set last_seen = now() - interval '1 minute'"
      " - make_interval(secs => 20 - substr(host_id, 2)::int)"
      " where substr(host_id, 2)::int <= 12");
  // At most max(10, 10% of 30) = 10 a minute.
  EXPECT_EQ(Sweep(sql), 10);
  EXPECT_EQ(Sweep(sql), 0);
  EXPECT_EQ(sql.Str("select string_agg(id, ',' order by id) from pgfleet.hosts where state <> 'lost'"
                    " and substr(id, 2)::int <= 12"),
            "h11,h12");
  EXPECT_EQ(sql.Num("select waiting_for_rate from pgfleet.host_loss_guard"), 2);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.host_loss_events where kind = 'rate_limited'"
                    " and detail like '2 silent hosts wait: at most 10 hosts are declared lost in a "
                    "minute%'"),
            1);
  // A minute later the rest go.
  sql.Exec("update pgfleet.hosts set lost_at = lost_at - interval '61 seconds' where lost_at is not null");
  EXPECT_EQ(Sweep(sql), 2);
  EXPECT_EQ(sql.Num("select waiting_for_rate from pgfleet.host_loss_guard"), 0);
  // The limit grows with the fleet: a share of it (10% of the 18 hosts left,
  // rounded up: 2 a minute, over host_losses_per_minute = 1).
  sql.Exec("insert into pgfleet.settings (name, value) values ('host_losses_per_minute', '1')");
  sql.Exec("update pgfleet.hosts set lost_at = null");
  Silence(sql, 13, 15);
  EXPECT_EQ(Sweep(sql), 2);
  EXPECT_EQ(sql.Num("select waiting_for_rate from pgfleet.host_loss_guard"), 1);
}

TEST(HostLossGuard, SilenceCountsFromTheSweepingSessionsStart) {
  TestDatabase db;
  Sql sql(db);
  HostsWithAJobEach(sql, 1);
  Silence(sql, 1, 1);
  // A session that has just (re)connected has not seen the host miss a TTL
  // of heartbeats: it judges no host yet.
  Sql fresh(db);
  EXPECT_EQ(fresh.Num("select count(*) from pgfleet.sweep_lost_hosts(10)"), 0);
  EXPECT_EQ(fresh.Str("select pgfleet.hosts_judged_from() > now() - interval '10 seconds'"), "t");
  EXPECT_EQ(fresh.Str("select pgfleet.hosts_judged_from() >= pg_postmaster_start_time()"), "t");
  // Nor would it with a short TTL, had its session started within it.
  EXPECT_EQ(fresh.Num("select count(*) from pgfleet.sweep_lost_hosts(10, now() - interval '5 seconds')"),
            0);
  EXPECT_EQ(sql.Num("select count(*) from pgfleet.hosts where state = 'lost'"), 0);
  // Judged from before the silence began, it is lost.
  EXPECT_EQ(fresh.Num("select count(*) from pgfleet.sweep_lost_hosts(10, now() - interval '1 hour')"),
            1);
}

TEST(Settings, EveryValueIsCheckedWhenWrittenAndABadOneChangesNothing) {
  TestDatabase db;
  Sql sql(db);
  struct Case {
    std::string name, value, error;
  };
  for (const Case& c : std::vector<Case>{
           {"host_ttl_seconds", "abc", "host_ttl_seconds must be a number (got \"abc\")"},
           {"host_ttl_seconds", "-5", "host_ttl_seconds must be between 1 and 86400 (got -5)"},
           {"host_ttl_seconds", "0", "host_ttl_seconds must be between 1 and 86400 (got 0)"},
           {"host_ttl_seconds", "1e400", "host_ttl_seconds must be a number"},
           {"host_ttl_seconds", "", "host_ttl_seconds must be a number"},
           {"max_replicas", "1.5", "max_replicas must be an integer (got \"1.5\")"},
           {"max_replicas", "99999999999999999999",
            "max_replicas must be between 0 and 1000000 (got 99999999999999999999)"},
           {"host_loss_guard_share", "0", "host_loss_guard_share must be between 0.01 and 1"},
           {"host_loss_guard_share", "2", "host_loss_guard_share must be between 0.01 and 1"},
           {"host_loss_guard_min_hosts", "0", "host_loss_guard_min_hosts must be between 1"},
           {"host_losses_per_minute", "-1", "host_losses_per_minute must be between 1"},
           {"host_losses_per_minute_share", "1.5", "host_losses_per_minute_share must be between 0 and 1"},
           {"host_ttl_second", "10", "setting name must be one of cron_seconds_field, host_loss_guard_min_hosts, "
                                     "host_loss_guard_share, host_losses_per_minute, "
                                     "host_losses_per_minute_share, host_ttl_seconds, "
                                     "max_disk_mib, max_log_mib, max_pids, max_priority, "
                                     "max_replicas, max_stop_grace_seconds "
                                     "(got \"host_ttl_second\")"},
           {"max_disk_mib", "0", "max_disk_mib must be between 1 and 16777216 (got 0)"},
           {"max_log_mib", "1", "max_log_mib must be between 2 and 104857600 (got 1)"},
           {"max_pids", "100", "max_pids must be between 1024 and 4194304 (got 100)"},
           {"max_stop_grace_seconds", "5", "max_stop_grace_seconds must be between 10 and 86400"},
       }) {
    std::string err = sql.ErrorOf(
        "insert into pgfleet.settings (name, value) values ($1, $2)"
        " on conflict (name) do update set value = excluded.value",
        c.name, c.value);
    EXPECT_NE(err.find(c.error), std::string::npos) << c.name << "=" << c.value << ": " << err;
  }
  EXPECT_EQ(sql.Str("select string_agg(name || '=' || value, ' ') from pgfleet.settings"),
            "host_ttl_seconds=10");
  // Good values are taken, and what is in force is one view.
  sql.Exec("update pgfleet.settings set value = ' 2.5 ' where name = 'host_ttl_seconds'");
  sql.Exec("insert into pgfleet.settings (name, value) values ('max_replicas', '20000')");
  EXPECT_EQ(sql.Str("select string_agg(name || '=' || value || ':' || set, ' ')"
                    " from pgfleet.settings_in_force where name in ('host_ttl_seconds', "
                    "'max_replicas', 'host_loss_guard_share')"),
            "host_loss_guard_share=0.55:false host_ttl_seconds=2.5:true max_replicas=20000:true");
  EXPECT_EQ(sql.Str("select extract(epoch from pgfleet.host_ttl())"), "2.500000");
}

}  // namespace
}  // namespace pgfleet::integration
