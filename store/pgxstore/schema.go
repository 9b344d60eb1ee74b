package pgxstore

import (
	"context"
	"fmt"
	"strings"
)

// migrateLockKey is the advisory lock Migrate holds while it runs, so that
// processes starting together do not race on CREATE ... IF NOT EXISTS (which
// is not safe against concurrent creation of the same object).
const migrateLockKey = 0x6c6f6262796d6967 // "lobbymig"

// ddl is the schema. %[1]s is the quoted schema name. Every statement is
// idempotent, so running it again on an up-to-date schema changes nothing.
const ddl = `CREATE SCHEMA IF NOT EXISTS %[1]s;

-- One row per lobby ID ever written. A deleted lobby stays as a tombstone
-- (deleted = true, deadline NULL, data kept) whose version is its floor.
CREATE TABLE IF NOT EXISTS %[1]s.lobbies (
	id            bytea   PRIMARY KEY,          -- lobby ID, compared byte for byte
	version       bigint  NOT NULL,             -- uint64 bit pattern
	deleted       boolean NOT NULL DEFAULT false,
	data          bytea,                        -- NULL when written as nil
	deadline      bigint,                       -- Unix nanoseconds; NULL: none
	claimed_until bigint                        -- Unix nanoseconds; NULL: unclaimed
);

-- The due index: Due and Claim walk it in (deadline, id) order.
CREATE INDEX IF NOT EXISTS lobbies_due ON %[1]s.lobbies (deadline, id)
	WHERE deadline IS NOT NULL;

-- One value per write that carries events; orders the outbox by write.
CREATE SEQUENCE IF NOT EXISTS %[1]s.outbox_pos;

CREATE TABLE IF NOT EXISTS %[1]s.outbox (
	pos   bigint  NOT NULL,                     -- from outbox_pos, one per write
	idx   integer NOT NULL,                     -- the event's place in its write
	lobby bytea   NOT NULL,
	seq   bigint  NOT NULL,                     -- uint64 bit pattern
	data  bytea,
	PRIMARY KEY (pos, idx)
);

-- Ack finds events by (lobby, seq).
CREATE INDEX IF NOT EXISTS outbox_event ON %[1]s.outbox (lobby, seq);
`

// MigrationSQL returns the DDL that [Store.Migrate] runs, for teams that
// apply schema changes with their own migration tool. It is idempotent.
func (s *Store) MigrationSQL() string {
	return fmt.Sprintf(ddl, quoteIdent(s.schema))
}

// Migrate creates the Store's schema, tables, index and sequence if they do
// not exist yet. It is idempotent and safe to call from several processes at
// once (a transaction-scoped advisory lock serialises them). The role needs
// the CREATE privilege on the database, or on the schema if it exists.
func (s *Store) Migrate(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail(ctx, "migrate", s.schema, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLockKey)); err != nil {
		return s.fail(ctx, "migrate", s.schema, err)
	}
	if _, err := tx.Exec(ctx, s.MigrationSQL()); err != nil {
		return s.fail(ctx, "migrate", s.schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail(ctx, "migrate", s.schema, err)
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// quoteLiteral quotes a PostgreSQL string literal.
func quoteLiteral(s string) string {
	return `'` + strings.ReplaceAll(s, `'`, `''`) + `'`
}

// queries holds the Store's statements with the schema filled in. Each is
// one statement, sent with the extended protocol and cached as a prepared
// statement on every pooled connection by pgx.
type queries struct {
	load, probe                                string
	create, createEvents, update, updateEvents string
	delete                                     string
	due, claim                                 string
	pending, ack                               string
}

func buildQueries(schema string) queries {
	s := quoteIdent(schema)
	r := strings.NewReplacer("_S_.", s+".", "POSSEQ", quoteLiteral(s+".outbox_pos"))
	q := queries{
		load:  `SELECT version, deleted, data, deadline FROM _S_.lobbies WHERE id = $1`,
		probe: `SELECT version, deleted FROM _S_.lobbies WHERE id = $1`,

		// Creating: a compare-and-set against the implicit floor 0. Any
		// existing row, live or tombstone, has a version of at least 1, so
		// a conflict on the primary key is a version conflict.
		// $1 id, $2 version, $3 data, $4 deadline.
		create: `INSERT INTO _S_.lobbies (id, version, data, deadline) VALUES ($1, $2, $3, $4)
ON CONFLICT (id) DO NOTHING`,

		// As create, plus the events ($5 seqs, $6 data) under one outbox
		// position, inserted only if the lobby row was, and a notification
		// on channel $7 that PostgreSQL delivers when (and only if) the
		// transaction commits. Returns the number of lobby rows written.
		createEvents: `WITH w AS (
	INSERT INTO _S_.lobbies (id, version, data, deadline) VALUES ($1, $2, $3, $4)
	ON CONFLICT (id) DO NOTHING
	RETURNING 1),
p AS (SELECT nextval(POSSEQ) AS pos FROM w),
e AS (INSERT INTO _S_.outbox (pos, idx, lobby, seq, data)
	SELECT p.pos, x.idx, $1, x.seq, x.data
	FROM p, unnest($5::bigint[], $6::bytea[]) WITH ORDINALITY AS x(seq, data, idx))
SELECT count(*), count(pg_notify($7, '')) FROM w`,

		// The heartbeat path: one conditional UPDATE of one row. It sends
		// no notification: NOTIFY makes committing transactions queue for
		// one database-wide lock, which heartbeats must not pay for.
		// $1 id, $2 expected, $3 next, $4 data, $5 deadline.
		update: `UPDATE _S_.lobbies
SET version = $3, deleted = false, data = $4, deadline = $5, claimed_until = NULL
WHERE id = $1 AND version = $2`,

		// As update, plus the events ($6 seqs, $7 data) and the
		// notification on channel $8, as in createEvents.
		updateEvents: `WITH w AS (
	UPDATE _S_.lobbies
	SET version = $3, deleted = false, data = $4, deadline = $5, claimed_until = NULL
	WHERE id = $1 AND version = $2
	RETURNING 1),
p AS (SELECT nextval(POSSEQ) AS pos FROM w),
e AS (INSERT INTO _S_.outbox (pos, idx, lobby, seq, data)
	SELECT p.pos, x.idx, $1, x.seq, x.data
	FROM p, unnest($6::bigint[], $7::bytea[]) WITH ORDINALITY AS x(seq, data, idx))
SELECT count(*), count(pg_notify($8, '')) FROM w`,

		// $1 id, $2 expected, $3 floor.
		delete: `UPDATE _S_.lobbies
SET version = $3, deleted = true, deadline = NULL, claimed_until = NULL
WHERE id = $1 AND version = $2 AND NOT deleted`,

		// $1 now, $2 limit.
		due: `SELECT id, deadline FROM _S_.lobbies WHERE deadline <= $1 ORDER BY deadline, id LIMIT $2`,

		// Rows locked by another claimer (or by a write in flight) are
		// skipped rather than waited for, so concurrent sweepers get
		// disjoint sets. $1 now, $2 limit, $3 claimed until.
		claim: `WITH c AS (
	SELECT id FROM _S_.lobbies
	WHERE deadline <= $1 AND (claimed_until IS NULL OR claimed_until <= $1)
	ORDER BY deadline, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED)
UPDATE _S_.lobbies AS l SET claimed_until = $3 FROM c WHERE l.id = c.id
RETURNING l.id, l.deadline`,

		// $1 limit.
		pending: `SELECT lobby, seq, data FROM _S_.outbox ORDER BY pos, idx LIMIT $1`,

		// Locks the rows in one global order before deleting them, so two
		// relays acking overlapping sets cannot deadlock.
		// $1 lobbies, $2 seqs.
		ack: `WITH k AS (
	SELECT o.pos, o.idx
	FROM _S_.outbox AS o
	JOIN unnest($1::bytea[], $2::bigint[]) AS a(lobby, seq) ON o.lobby = a.lobby AND o.seq = a.seq
	ORDER BY o.pos, o.idx
	FOR UPDATE OF o)
DELETE FROM _S_.outbox AS o USING k WHERE o.pos = k.pos AND o.idx = k.idx`,
	}
	for _, p := range []*string{
		&q.load, &q.probe, &q.create, &q.createEvents, &q.update, &q.updateEvents,
		&q.delete, &q.due, &q.claim, &q.pending, &q.ack,
	} {
		*p = r.Replace(*p)
	}
	return q
}
