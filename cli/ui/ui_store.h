#pragma once
// The dashboard's reads of the database (ui_queries.sql, and the CLI's
// log ticket and attempt host statements of cli/queries.h), through a few
// connections made with the login it was given, so row-level security
// decides what it shows. Every read returns a JSON document as text, made by
// PostgreSQL; nothing here writes.
//
// What must hold: safe to call from any number of HTTP threads at once
// (each call takes a connection of the pool, waiting when all are in use);
// a broken connection is dropped and made again on the next call, so a
// database restart costs the calls that were running then.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace pgfleet::cli::ui {

struct JobsQuery {
  std::string state, formation, host, owner;  // "" = any
  int limit = 200;                            // the newest so many
};

struct JobDocument {
  std::string json;     // the visible_jobs row with "events" and "attempts"
  std::string api_url;  // the host of its latest attempt ("" when unknown)
};

class UiStore {
 public:
  // dsn: "" lets libpq read $PG* variables. At most `connections` at once.
  UiStore(std::string dsn, int connections);
  ~UiStore();
  UiStore(const UiStore&) = delete;
  UiStore& operator=(const UiStore&) = delete;

  // Connects once, to report a bad DSN or login at startup (throws).
  void Check();

  std::string Summary();
  std::string Hosts();
  std::string Formations();
  std::string Jobs(const JobsQuery& q);
  // nullopt when there is no such job, or the login may not see it.
  std::optional<JobDocument> Job(int64_t id);
  // Where attempt `attempt` of job `id` ran ("" when not known or gone).
  std::string AttemptHostApi(int64_t id, int attempt);
  // pgfleet.log_ticket for the attempt, minted for the login; "" with *why
  // when the database refuses (a reader is not the job's owner).
  std::string LogTicket(int64_t id, int attempt, std::string* why);
  // ui_fingerprint: changes when any job changes state or a host changes.
  std::string Fingerprint();

 private:
  // Runs fn on a connection of the pool; drops it if it broke.
  template <typename T>
  T With(const std::function<T(pqxx::connection&)>& fn);
  std::unique_ptr<pqxx::connection> Take();
  void Give(std::unique_ptr<pqxx::connection> conn);

  std::string dsn_;
  int max_;
  std::mutex mu_;
  std::condition_variable free_;
  int open_ = 0;  // connections made and not dropped (in use or idle)
  std::vector<std::unique_ptr<pqxx::connection>> idle_;
};

}  // namespace pgfleet::cli::ui
