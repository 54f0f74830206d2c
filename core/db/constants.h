#pragma once
// Names the database and the daemons must agree on, defined once.

namespace pgfleet::db {

// Class (first key) of every pgfleet advisory lock, two-integer form, so our
// locks never collide with other applications' (hashed 32-bit keys do).
// Also returned by SQL pgfleet.lock_class(); a test checks they agree. 'pgft'.
inline constexpr int kLockClass = 0x70676674;
// Second key of the lock serializing `pgfleet migrate` (formation ids are > 0).
inline constexpr int kMigrateLockKey = -1;

// Second key of the lock that lets one scheduler at a time prune old jobs.
inline constexpr int kPruneLockKey = -2;

// Channel the jobs trigger NOTIFYs; payload is a formation id, or "*" when
// capacity was freed and every formation with pending jobs should be retried.
inline constexpr const char* kWorkChannel = "pgfleet_work";
inline constexpr const char* kAllFormations = "*";

}  // namespace pgfleet::db
