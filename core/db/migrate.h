#pragma once
// The migration runner behind `pgfleet migrate`.

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace pgfleet::db {

// In one transaction holding the migrate advisory lock: applies each migration
// of migrations/ not yet recorded in pgfleet.schema_migrations (in name order),
// re-creates every object of sql/, then drops every function of schema pgfleet
// that sql/ no longer defines (renamed, removed, or an overload with other
// argument types), so no stale version can be called. Functions belonging to an
// extension are left alone. Safe to run concurrently and repeatedly: a second
// run applies nothing. Returns the names of the migrations applied. Throws,
// changing nothing, when a stale function cannot be dropped because something
// (a view, a trigger, a default) still depends on it; the message names it.
std::vector<std::string> Migrate(pqxx::connection& conn);

}  // namespace pgfleet::db
