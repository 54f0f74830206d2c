#pragma once
// The migration runner behind `pgfleet migrate`.

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace pgfleet::db {

// In one transaction holding the migrate advisory lock: applies each migration
// of migrations/ not yet recorded in pgfleet.schema_migrations (in name order),
// then re-creates every object of sql/. Safe to run concurrently and repeatedly:
// a second run applies nothing. Returns the names of the migrations applied.
std::vector<std::string> Migrate(pqxx::connection& conn);

}  // namespace pgfleet::db
