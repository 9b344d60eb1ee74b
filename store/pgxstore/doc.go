// Package pgxstore keeps lobbyhost lobbies in PostgreSQL: it implements
// store.Store, store.Claimer, store.Notifier, store.BatchWriter and
// store.Sessions on top
// of a pgx connection pool, so that several server processes can share
// lobbies through one database.
//
// # Layout
//
// Everything lives in one PostgreSQL schema (option [WithSchema], default
// "lobbyhost"), created by [Store.Migrate]; [Store.MigrationSQL] returns the
// same DDL for teams that run migrations with their own tool. The schema
// holds:
//
//   - lobbies: one row per lobby ID with its version, data, deadline (as
//     Unix nanoseconds, so the nanosecond round-trip that store.Record
//     promises survives), the claimed_until column used by [Store.Claim],
//     the number of log entries and the highest position retention
//     trimmed. A deleted lobby keeps its row as a tombstone (deleted =
//     true) only while it has log entries; then the row goes and its floor
//     is folded into store_floor. A partial index on (deadline, id) serves
//     [Store.Due] and [Store.Claim].
//   - store_floor: one row, the floor Load reports for IDs without a row.
//   - log: the effects log, one row per entry keyed by (lobby, position),
//     with an index on the entry time for [Store.TrimLog].
//   - consumers and cursors: durable consumers, and per consumer and lobby
//     the newest position written and the position committed, with a
//     partial index on the cursors that have work.
//   - sessions and session_lobbies: the sessions of [store.Sessions] (a
//     deadline in Unix nanoseconds, indexed for [Store.ExpiredSessions])
//     and per session the lobbies whose last write listed it, which the
//     write and delete functions keep with the lobby's row (the row keeps
//     the list in its sessions column).
//   - the functions write and delete, which run the steps of a write with
//     a log entry (or a creation, or a change of the lobby's sessions)
//     and of a Delete in one round trip.
//
// # Round trips
//
// Every call is one round trip, with two exceptions: a Write without a log
// entry is one conditional UPDATE, and only when it matches nothing (a
// version conflict, a lobby to create, or a change of the lobby's
// sessions) does a second round trip call the write function; registering a new consumer name takes a short transaction.
// A heartbeat is therefore a single UPDATE of one row, as before the log.
//
// [Store.WriteBatch] sends up to [MaxBatch] writes in one pipeline, which
// PostgreSQL runs as one transaction with one commit: each write is still
// its own compare-and-set, the writes are sorted by lobby ID so that
// concurrent batches lock rows in one order, and a batch the server rolls
// back as a whole is applied again write by write. See docs/postgres.md.
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
//   - Versions are stored as the bit pattern of int64, log positions,
//     floors and cursors with the top bit flipped (so they sort as
//     uint64), so the full uint64 range round-trips.
package pgxstore
