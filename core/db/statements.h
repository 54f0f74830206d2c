#pragma once
// Named, prepared statements: how every process's store module (schedulerd/
// store, hostd/store, cli/queries) talks to the database.
//
// A store declares its statements as constants:
//
//   inline constexpr db::Statement kClaimPending{"claim_pending", "select ... $1 ..."};
//
// lists them once, and calls PrepareAll(conn, list) on every new connection
// (ReconnectingConnection::SetOnConnect does that). Calls then go through
// Exec(tx, kClaimPending, args...), which runs the prepared statement by name.
// No SQL is assembled from strings at run time.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace pgfleet::db {

struct Statement {
  const char* name;  // unique within the process
  const char* sql;
};

// Prepares each statement on conn (call once per connection).
void PrepareAll(pqxx::connection& conn, std::initializer_list<const Statement*> statements);

// Runs a statement prepared by PrepareAll.
template <typename... Args>
pqxx::result Exec(pqxx::transaction_base& tx, const Statement& s, Args&&... args) {
  return tx.exec_prepared(s.name, std::forward<Args>(args)...);
}
template <typename... Args>
pqxx::row Exec1(pqxx::transaction_base& tx, const Statement& s, Args&&... args) {
  return tx.exec_prepared1(s.name, std::forward<Args>(args)...);
}
template <typename... Args>
void Exec0(pqxx::transaction_base& tx, const Statement& s, Args&&... args) {
  tx.exec_prepared0(s.name, std::forward<Args>(args)...);
}

// A text parameter that is null when empty.
inline std::optional<std::string> NullIfEmpty(const std::string& v) {
  if (v.empty()) return std::nullopt;
  return v;
}

// A PostgreSQL array literal for a parameter ("{1,2,3}", "{\"a\",\"b\\\"c\"}"),
// to pass as $n::bigint[] / $n::text[] (libpqxx 6 has no array parameters).
std::string ArrayParam(const std::vector<int64_t>& values);
std::string ArrayParam(const std::vector<int>& values);
std::string ArrayParam(const std::vector<std::string>& values);

}  // namespace pgfleet::db
