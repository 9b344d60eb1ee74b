// Package pgxstore keeps lobbyhost lobbies in PostgreSQL: it implements
// store.Store, store.Claimer and store.Notifier on top of a pgx connection
// pool, so that several server processes can share lobbies through one
// database.
//
// # Layout
//
// Everything lives in one PostgreSQL schema (option [WithSchema], default
// "lobbyhost"), created by [Store.Migrate]; [Store.MigrationSQL] returns the
// same DDL for teams that run migrations with their own tool. The schema
// holds two tables and a sequence:
//
//   - lobbies: one row per lobby ID with its version, data, deadline (as
//     Unix nanoseconds, so the nanosecond round-trip that store.Record
//     promises survives) and the claimed_until column used by [Store.Claim].
//     A deleted lobby keeps its row as a tombstone (deleted = true, data and
//     deadline NULL) whose version is the floor that store.Store requires.
//     A partial index on (deadline, id) serves [Store.Due] and [Store.Claim].
//   - outbox: one row per event, ordered by a per-write position taken from
//     the outbox_pos sequence plus the event's index inside its write.
//
// # Round trips
//
// Every Write is one SQL statement, hence one round trip and one implicit
// transaction: a conditional UPDATE keyed on (id, version) when the caller
// expects an existing version, an INSERT ... ON CONFLICT DO NOTHING when it
// expects 0, with the outbox insert attached as a data-modifying CTE when
// the write carries events. Zero affected rows means store.ErrConflict. A
// heartbeat (no events) is therefore a single UPDATE of one row.
//
// # Guarantees and non-guarantees
//
//   - Compare-and-set is exact: under PostgreSQL's READ COMMITTED isolation a
//     row-level lock serialises writers of one lobby, and a writer that
//     waited re-checks the version on the newest row before it writes.
//   - A call whose context is cancelled while its statement is in flight
//     returns the context's error, but the statement may still have
//     committed on the server (the usual ambiguity of any remote commit).
//     Callers re-read before retrying, which the lobby package does anyway.
//   - Deadlines are compared as plain numbers written by the callers'
//     clocks. The database clock is never consulted implicitly; processes
//     that should share it pass a [DBClock] to lobby.WithClock. See
//     docs/postgres.md on clock skew between processes.
//   - Deadlines must lie between the years 1678 and 2261 (the range of
//     int64 Unix nanoseconds); Write rejects others with store.ErrInvalid.
//   - Versions and sequence numbers are stored as the bit pattern of int64,
//     so the full uint64 range round-trips.
package pgxstore
