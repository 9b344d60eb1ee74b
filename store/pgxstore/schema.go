package pgxstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
)

// migrateLockKey is the advisory lock Migrate holds while it runs, so that
// processes starting together do not race on CREATE ... IF NOT EXISTS (which
// is not safe against concurrent creation of the same object).
const migrateLockKey = 0x6c6f6262796d6967 // "lobbymig"

// registerLockKey returns the advisory lock that orders consumer
// registration against writes with a log entry in one schema: writes take it
// shared, registration exclusively (see Store.RegisterConsumer). It is
// derived from the schema name so that schemas do not wait for each other.
func registerLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("lobbyhost consumer registration\x00"))
	h.Write([]byte(schema))
	return int64(h.Sum64())
}

// consumerLockKey returns the advisory lock that makes the ClaimLog and
// CommitLog calls of one consumer name take turns. Two names may share a
// key (it is a hash); they then take turns too, which costs only time.
func consumerLockKey(schema, name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("lobbyhost consumer\x00"))
	h.Write([]byte(schema))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return int64(h.Sum64())
}

// ddl is the schema. %[1]s is the quoted schema name, %[2]d the registration
// lock key. Every statement is idempotent, so running it again on an
// up-to-date schema changes nothing, and running it on a schema made by an
// earlier release adds what is missing without touching stored lobbies.
//
// Log positions, trim markers, floors and cursors are stored in the
// "ordered" encoding: the uint64 with its top bit flipped, read as a bigint,
// so that PostgreSQL's signed order is the unsigned order (0 is
// -9223372036854775808). lobbies.version keeps the plain bit pattern of
// earlier releases; it is only ever compared for equality.
const ddl = `CREATE SCHEMA IF NOT EXISTS %[1]s;

-- One row per lobby ID with a record, or with a tombstone (deleted = true,
-- deadline NULL, data kept, version = its floor) while its log has entries.
CREATE TABLE IF NOT EXISTS %[1]s.lobbies (
	id            bytea   PRIMARY KEY,          -- lobby ID, compared byte for byte
	version       bigint  NOT NULL,             -- uint64 bit pattern
	deleted       boolean NOT NULL DEFAULT false,
	data          bytea,                        -- NULL when written as nil
	deadline      bigint,                       -- Unix nanoseconds; NULL: none
	claimed_until bigint                        -- Unix nanoseconds; NULL: unclaimed
);

-- Added by the effects log (existing rows get the defaults).
ALTER TABLE %[1]s.lobbies
	-- highest log position retention removed (ordered encoding)
	ADD COLUMN IF NOT EXISTS trimmed   bigint NOT NULL DEFAULT -9223372036854775808,
	-- number of log entries the lobby has
	ADD COLUMN IF NOT EXISTS log_count bigint NOT NULL DEFAULT 0;

-- Added with Deletion.At and Deletion.Keep (existing rows get NULL, which
-- a tombstone reports as the zero time and no Keep).
ALTER TABLE %[1]s.lobbies
	-- in a tombstone: Deletion.At, Unix microseconds
	ADD COLUMN IF NOT EXISTS tomb_at    bigint,
	-- in a tombstone: Deletion.Keep rounded up to the microsecond, Unix
	-- microseconds; NULL when it has none left to wait for
	ADD COLUMN IF NOT EXISTS keep_until bigint;

-- TrimLog finds the tombstones whose Keep has come through it.
CREATE INDEX IF NOT EXISTS lobbies_keep ON %[1]s.lobbies (keep_until, id)
	WHERE deleted AND keep_until IS NOT NULL;

-- The due index: Due and Claim walk it in (deadline, id) order.
CREATE INDEX IF NOT EXISTS lobbies_due ON %[1]s.lobbies (deadline, id)
	WHERE deadline IS NOT NULL;

-- The store-wide floor: one row, at least every floor of a tombstone that
-- was removed. Load reports it for an ID without a row. Only Delete and the
-- removal of tombstones write it; creating a lobby reads it.
CREATE TABLE IF NOT EXISTS %[1]s.store_floor (
	one     boolean PRIMARY KEY DEFAULT true CHECK (one),
	version bigint  NOT NULL                    -- ordered encoding
);
INSERT INTO %[1]s.store_floor (version) VALUES (-9223372036854775808)
	ON CONFLICT DO NOTHING;
-- The latest At of a removed tombstone, Unix microseconds; NULL while none
-- had one.
ALTER TABLE %[1]s.store_floor ADD COLUMN IF NOT EXISTS at bigint;

-- The effects log: one row per entry, at the position of the version the
-- write created.
CREATE TABLE IF NOT EXISTS %[1]s.log (
	lobby   bytea  NOT NULL,
	version bigint NOT NULL,                    -- position, ordered encoding
	at      bigint NOT NULL,                    -- Write.At, Unix microseconds
	data    bytea  NOT NULL,
	PRIMARY KEY (lobby, version)
);

-- TrimLog walks the log oldest first.
CREATE INDEX IF NOT EXISTS log_age ON %[1]s.log (at);

-- Added with age keys: an entry is as old as the latest at of it and of
-- every earlier entry of its lobby, so that trimming by age removes a
-- prefix of a lobby's log even when a writer's clock went back. Entries of
-- earlier releases have NULL and count by their own at. TrimLog walks
-- log_age_key; log_age is what processes of earlier releases walk, and can
-- be dropped once none runs.
ALTER TABLE %[1]s.log ADD COLUMN IF NOT EXISTS age_key bigint;
CREATE INDEX IF NOT EXISTS log_age_key ON %[1]s.log ((coalesce(age_key, at)), lobby, version);

-- Durable consumers, by name.
CREATE TABLE IF NOT EXISTS %[1]s.consumers (
	name bytea PRIMARY KEY
);

-- Per consumer and lobby: the newest position written (head) and the
-- position committed (after). A write with a log entry upserts the row of
-- every consumer, CommitLog raises after. A row with nothing to do goes
-- when its lobby's tombstone folds (its ID then starts afresh).
CREATE TABLE IF NOT EXISTS %[1]s.cursors (
	name          bytea  NOT NULL,
	lobby         bytea  NOT NULL,
	head          bigint NOT NULL,              -- ordered encoding
	after         bigint NOT NULL,              -- ordered encoding
	since         bigint NOT NULL,              -- At of the oldest pending entry, Unix microseconds
	claimed_until bigint,                       -- Unix nanoseconds; NULL: unclaimed
	PRIMARY KEY (name, lobby)
);

-- ClaimLog's index: only lobbies with work, oldest work first.
CREATE INDEX IF NOT EXISTS cursors_work ON %[1]s.cursors (name, since, lobby)
	WHERE head > after;

-- Sessions (store.Sessions), added with them: liveness records of the
-- processes that hold connections. ended: EndSession was called, so no
-- renewal succeeds whatever its now.
CREATE TABLE IF NOT EXISTS %[1]s.sessions (
	id       bytea   PRIMARY KEY,
	deadline bigint  NOT NULL,                  -- Unix nanoseconds
	ended    boolean NOT NULL DEFAULT false
);
-- ExpiredSessions walks it in (deadline, id) order.
CREATE INDEX IF NOT EXISTS sessions_deadline ON %[1]s.sessions (deadline, id);

-- Per session, the lobbies whose last write listed it; written by the
-- write and delete functions with the lobby's row. A session never opened
-- (or forgotten) may have rows too.
CREATE TABLE IF NOT EXISTS %[1]s.session_lobbies (
	session bytea NOT NULL,
	lobby   bytea NOT NULL,
	PRIMARY KEY (session, lobby)
);

-- The lobby's Write.Sessions (NULL: none), so that the next write and
-- Delete know which rows of session_lobbies are the lobby's.
ALTER TABLE %[1]s.lobbies ADD COLUMN IF NOT EXISTS sessions bytea[];

-- A write that needs more than one statement: the compare-and-set, the log
-- entry, count retention, the consumers' cursors and the notification, in
-- one call. Each statement in it reads a fresh snapshot, taken after the
-- lobby's row is locked, so what it counts and trims is exact. Returns
-- false for a version conflict.
--
-- p_sessions is Write.Sessions (NULL for none): the sessions whose index
-- holds the lobby after the write. The lobby row keeps the list, so the
-- next write knows which index rows to remove.
CREATE OR REPLACE FUNCTION %[1]s.write(
	p_id bytea, p_expected bigint, p_next bigint, p_base bigint, p_pos bigint,
	p_data bytea, p_deadline bigint, p_effects boolean, p_at bigint, p_entry bytea,
	p_keep bigint, p_channel text, p_payload text, p_sessions bytea[])
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
	v_count   bigint;
	v_floor   bigint;
	v_top     bigint;
	v_removed bigint;
	v_old     bytea[];
BEGIN
	IF p_effects THEN
		-- Registration takes this lock exclusively: it waits for the writes
		-- that might not see the new consumer, and later ones wait for it.
		PERFORM pg_advisory_xact_lock_shared(%[2]d);
	END IF;
	-- The sessions the previous write listed, read under the row lock the
	-- UPDATE below keeps until commit.
	SELECT sessions INTO v_old FROM %[1]s.lobbies
	WHERE id = p_id AND version = p_expected FOR UPDATE;
	UPDATE %[1]s.lobbies
	SET version = p_next, deleted = false, data = p_data, deadline = p_deadline,
		claimed_until = NULL, log_count = log_count + p_effects::int, sessions = p_sessions
	WHERE id = p_id AND version = p_expected
	RETURNING log_count INTO v_count;
	IF NOT FOUND THEN
		PERFORM FROM %[1]s.lobbies WHERE id = p_id;
		IF FOUND THEN
			RETURN false;
		END IF;
		-- No row: the version is the store-wide floor. Holding it shared
		-- keeps it from rising until this write commits.
		SELECT version INTO v_floor FROM %[1]s.store_floor FOR SHARE;
		IF v_floor <> p_base THEN
			RETURN false;
		END IF;
		INSERT INTO %[1]s.lobbies (id, version, data, deadline, trimmed, log_count, sessions)
		VALUES (p_id, p_next, p_data, p_deadline, p_base, p_effects::int, p_sessions)
		ON CONFLICT (id) DO NOTHING;
		IF NOT FOUND THEN
			RETURN false;
		END IF;
		v_count := p_effects::int;
		v_old := NULL;
	END IF;
	IF v_old IS DISTINCT FROM p_sessions THEN
		DELETE FROM %[1]s.session_lobbies
		WHERE session = ANY (v_old) AND lobby = p_id
			AND NOT (session = ANY (coalesce(p_sessions, '{}')));
		INSERT INTO %[1]s.session_lobbies (session, lobby)
		SELECT x, p_id FROM unnest(p_sessions) AS x
		ON CONFLICT DO NOTHING;
	END IF;
	IF NOT p_effects THEN
		RETURN true;
	END IF;
	INSERT INTO %[1]s.log (lobby, version, at, age_key, data)
	VALUES (p_id, p_pos, p_at, greatest(p_at, (
		SELECT coalesce(g.age_key, g.at) FROM %[1]s.log AS g
		WHERE g.lobby = p_id ORDER BY g.version DESC LIMIT 1)), p_entry);
	IF p_keep > 0 AND v_count > p_keep THEN
		WITH d AS (
			DELETE FROM %[1]s.log
			WHERE lobby = p_id AND version IN (
				SELECT version FROM %[1]s.log WHERE lobby = p_id
				ORDER BY version LIMIT v_count - p_keep)
			RETURNING version)
		SELECT max(version), count(*) INTO v_top, v_removed FROM d;
		IF v_removed > 0 THEN
			UPDATE %[1]s.lobbies
			SET trimmed = greatest(trimmed, v_top), log_count = log_count - v_removed
			WHERE id = p_id;
		END IF;
	END IF;
	INSERT INTO %[1]s.cursors AS c (name, lobby, head, after, since)
	SELECT name, p_id, p_pos, p_base, p_at FROM %[1]s.consumers
	ON CONFLICT (name, lobby) DO UPDATE
	SET since = CASE WHEN c.head > c.after THEN c.since ELSE excluded.since END,
		head = greatest(c.head, excluded.head);
	PERFORM pg_notify(p_channel, p_payload);
	RETURN true;
END
$fn$;

-- The write function of earlier releases, for their processes during a
-- rolling upgrade: it keeps the lobby's sessions as they are. The list is
-- read for the expected version, which names one write, so if the lobby
-- moves on in between the write conflicts instead of using a stale list.
CREATE OR REPLACE FUNCTION %[1]s.write(
	p_id bytea, p_expected bigint, p_next bigint, p_base bigint, p_pos bigint,
	p_data bytea, p_deadline bigint, p_effects boolean, p_at bigint, p_entry bytea,
	p_keep bigint, p_channel text, p_payload text)
RETURNS boolean LANGUAGE sql AS $fn$
	SELECT %[1]s.write(p_id, p_expected, p_next, p_base, p_pos, p_data, p_deadline, p_effects,
		p_at, p_entry, p_keep, p_channel, p_payload,
		(SELECT sessions FROM %[1]s.lobbies WHERE id = p_id AND version = p_expected AND NOT deleted))
$fn$;

-- Delete: a tombstone while the lobby has log entries or a Keep, else no
-- row and the floor and At folded into store_floor. Returns 'd' (deleted,
-- tombstone left), 'f' (deleted and folded), 'n' (no record) or 'c'
-- (version conflict). The function of earlier releases took four
-- arguments; it is dropped so that no process keeps deleting without At.
DROP FUNCTION IF EXISTS %[1]s.delete(bytea, bigint, bigint, bigint);
CREATE OR REPLACE FUNCTION %[1]s.delete(
	p_id bytea, p_expected bigint, p_floor bigint, p_floor_ordered bigint,
	p_at bigint, p_keep bigint)
RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
	v_version  bigint;
	v_deleted  boolean;
	v_count    bigint;
	v_sessions bytea[];
BEGIN
	SELECT version, deleted, log_count, sessions INTO v_version, v_deleted, v_count, v_sessions
	FROM %[1]s.lobbies WHERE id = p_id FOR UPDATE;
	IF NOT FOUND OR v_deleted THEN
		RETURN 'n';
	ELSIF v_version <> p_expected THEN
		RETURN 'c';
	END IF;
	IF v_sessions IS NOT NULL THEN
		DELETE FROM %[1]s.session_lobbies WHERE session = ANY (v_sessions) AND lobby = p_id;
	END IF;
	IF v_count > 0 OR p_keep IS NOT NULL THEN
		UPDATE %[1]s.lobbies
		SET version = p_floor, deleted = true, deadline = NULL, claimed_until = NULL,
			tomb_at = p_at, keep_until = p_keep, sessions = NULL
		WHERE id = p_id;
		RETURN 'd';
	END IF;
	DELETE FROM %[1]s.lobbies WHERE id = p_id;
	UPDATE %[1]s.store_floor
	SET version = greatest(version, p_floor_ordered), at = greatest(at, p_at);
	DELETE FROM %[1]s.cursors AS c USING %[1]s.consumers AS k
	WHERE c.name = k.name AND c.lobby = p_id
		AND c.head <= c.after AND c.after <= p_floor_ordered;
	RETURN 'f';
END
$fn$;
`

// MigrationSQL returns the DDL that [Store.Migrate] runs, for teams that
// apply schema changes with their own migration tool. It is idempotent.
func (s *Store) MigrationSQL() string {
	return fmt.Sprintf(ddl, quoteIdent(s.schema), registerLockKey(s.schema))
}

// Migrate creates the Store's schema, tables, indexes and functions if they
// do not exist yet, and adds the columns that earlier releases lacked. It is
// idempotent and safe to call from several processes at once (a
// transaction-scoped advisory lock serialises them). The role needs the
// CREATE privilege on the database, or on the schema if it exists.
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

// queries holds the Store's statements with the schema filled in. Each is
// one statement, sent with the extended protocol and cached as a prepared
// statement on every pooled connection by pgx.
type queries struct {
	load, update, write, delete string
	updateOrWrite               string
	due, claim                  string
	readLog, logHeads, trimLog  string
	trimKept                    string
	isConsumer, register        string
	consumerLock                string
	claimLog                    string
	commitLog                   string

	openSession, renewSession, endSession string
	sessionDeadlines, expiredSessions     string
	sessionLobbies                        string
}

func buildQueries(schema string) queries {
	r := strings.NewReplacer("_S_.", quoteIdent(schema)+".")
	q := queries{
		// The floor comes along, for an ID without a row.
		load: `SELECT l.version, l.deleted, l.data, l.deadline, l.tomb_at, f.version, f.at
FROM _S_.store_floor AS f LEFT JOIN _S_.lobbies AS l ON l.id = $1`,

		// The heartbeat path (a write without a log entry whose row
		// exists): one conditional UPDATE of one row, no notification.
		// When it matches nothing, Write calls the write function, which
		// tells a conflict from a lobby to create.
		// $1 id, $2 expected, $3 next, $4 data, $5 deadline.
		// It matches only while the lobby's sessions stay as they were
		// ($6): a write that changes them goes to the write function,
		// which keeps session_lobbies in step.
		update: `UPDATE _S_.lobbies
SET version = $3, deleted = false, data = $4, deadline = $5, claimed_until = NULL
WHERE id = $1 AND version = $2 AND sessions IS NOT DISTINCT FROM $6::bytea[]`,

		write: `SELECT _S_.write($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14::bytea[])`,

		// A write without a log entry in a WriteBatch: the heartbeat
		// UPDATE, and only if it matches nothing the write function, in
		// one statement (so a batch stays one round trip and a later
		// write to the same lobby sees the outcome). COALESCE evaluates
		// the function only when the UPDATE returned no row, and then the
		// UPDATE changed nothing the function could fail to see.
		// $1 id, $2 expected, $3 next, $4 data, $5 deadline,
		// $6 expected (ordered), $7 next (ordered), $8 sessions.
		updateOrWrite: `WITH u AS (
	UPDATE _S_.lobbies
	SET version = $3, deleted = false, data = $4, deadline = $5, claimed_until = NULL
	WHERE id = $1 AND version = $2 AND sessions IS NOT DISTINCT FROM $8::bytea[]
	RETURNING true AS ok)
SELECT coalesce((SELECT ok FROM u),
	_S_.write($1, $2, $3, $6, $7, $4, $5, false, 0, ''::bytea, 0, ''::text, ''::text, $8::bytea[]))`,

		delete: `SELECT _S_.delete($1, $2, $3, $4, $5, $6)`,

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

		// One snapshot: first a header row with the lobby's trim marker
		// (NULL without a row) and the store-wide floor, then the entries.
		// $1 id, $2 after (ordered), $3 limit.
		readLog: `SELECT true, (SELECT trimmed FROM _S_.lobbies WHERE id = $1), (SELECT version FROM _S_.store_floor),
	NULL::bigint, NULL::bigint, NULL::bytea
UNION ALL
SELECT false, NULL, NULL, e.version, e.at, e.data FROM (
	SELECT version, at, data FROM _S_.log WHERE lobby = $1 AND version > $2 ORDER BY version LIMIT $3) AS e`,

		// $1 ids.
		logHeads: `SELECT (SELECT max(g.version) FROM _S_.log AS g WHERE g.lobby = x.id)
FROM unnest($1::bytea[]) WITH ORDINALITY AS x(id, i) ORDER BY x.i`,

		// Age retention. The oldest entries first by age key (log_age_key), then their
		// lobbies' rows are locked, skipping rows a write holds, so the
		// counts, trim markers and tombstone removals agree with what the
		// DELETE really removed. A removed tombstone takes the cursors
		// with nothing to do along; a tombstone whose Keep is after now
		// stays, without entries, for trimKept to remove. $1 cutoff (Unix
		// microseconds), $2 limit, $3 now (Unix microseconds).
		trimLog: `WITH cand AS (
	SELECT lobby, version FROM _S_.log WHERE coalesce(age_key, at) < $1
	ORDER BY coalesce(age_key, at), lobby, version LIMIT $2),
lk AS (
	SELECT id, version, deleted, log_count, tomb_at, keep_until FROM _S_.lobbies
	WHERE id IN (SELECT lobby FROM cand)
	ORDER BY id
	FOR UPDATE SKIP LOCKED),
del AS (
	DELETE FROM _S_.log AS g USING cand, lk
	WHERE g.lobby = cand.lobby AND g.version = cand.version AND lk.id = cand.lobby
	RETURNING g.lobby, g.version),
agg AS (
	SELECT lk.id, lk.version, lk.tomb_at, lk.log_count - count(*) AS remaining, max(del.version) AS top,
		lk.deleted AND lk.log_count = count(*) AND coalesce(lk.keep_until <= $3, true) AS fold
	FROM del JOIN lk ON lk.id = del.lobby
	GROUP BY lk.id, lk.version, lk.deleted, lk.log_count, lk.tomb_at, lk.keep_until),
upd AS (
	UPDATE _S_.lobbies AS l SET log_count = agg.remaining, trimmed = greatest(l.trimmed, agg.top)
	FROM agg WHERE l.id = agg.id AND NOT agg.fold),
gone AS (
	DELETE FROM _S_.lobbies AS l USING agg
	WHERE l.id = agg.id AND agg.fold
	RETURNING agg.id, agg.version # '-9223372036854775808'::bigint AS floor, agg.tomb_at),
fold AS (
	UPDATE _S_.store_floor
	SET version = greatest(version, (SELECT max(floor) FROM gone)),
		at = greatest(at, (SELECT max(tomb_at) FROM gone))
	WHERE EXISTS (SELECT FROM gone)),
idle AS (
	DELETE FROM _S_.cursors AS c USING gone, _S_.consumers AS k
	WHERE c.name = k.name AND c.lobby = gone.id
		AND c.head <= c.after AND c.after <= gone.floor)
SELECT count(*) FROM del`,

		// Tombstones whose Keep has come: one without entries goes (up to
		// $2 of them, counted), one that still has entries forgets its
		// Keep and goes with its last entry (not counted: each Keep is
		// forgotten once, so this costs what the Deletes with a Keep did).
		// The two sets are disjoint, so no row is changed twice. $1 now
		// (Unix microseconds), $2 limit.
		trimKept: `WITH clear AS (
	UPDATE _S_.lobbies SET keep_until = NULL
	WHERE deleted AND keep_until <= $1 AND log_count > 0),
cand AS (
	SELECT id, version, tomb_at FROM _S_.lobbies
	WHERE deleted AND keep_until <= $1 AND log_count = 0
	ORDER BY keep_until, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED),
gone AS (
	DELETE FROM _S_.lobbies AS l USING cand WHERE l.id = cand.id
	RETURNING cand.id, cand.version # '-9223372036854775808'::bigint AS floor, cand.tomb_at),
fold AS (
	UPDATE _S_.store_floor
	SET version = greatest(version, (SELECT max(floor) FROM gone)),
		at = greatest(at, (SELECT max(tomb_at) FROM gone))
	WHERE EXISTS (SELECT FROM gone)),
idle AS (
	DELETE FROM _S_.cursors AS c USING gone, _S_.consumers AS k
	WHERE c.name = k.name AND c.lobby = gone.id
		AND c.head <= c.after AND c.after <= gone.floor)
SELECT count(*) FROM gone`,

		// $1 name.
		isConsumer: `SELECT EXISTS (SELECT FROM _S_.consumers WHERE name = $1)`,
		register:   `INSERT INTO _S_.consumers (name) VALUES ($1) ON CONFLICT DO NOTHING`,

		// $1 the name's lock key.
		consumerLock: `SELECT pg_advisory_xact_lock($1)`,

		// Runs after the name's lock (see consumerLockKey), so no other
		// claim or commit of the name is in flight: a cursor locked now is
		// held by a write, which only raises head, so waiting for it
		// (rather than skipping it) keeps the cursor available and the
		// answer exact. A trailing row (false, ...) says the name is not
		// registered. $1 name, $2 now, $3 limit, $4 claimed until.
		//
		// The rows are picked by age but locked in lobby order, the order
		// in which a WriteBatch locks them: a claim that locked an old
		// lobby's cursor and then waited for a younger one's, held by a
		// batch that waits for the old one next, would deadlock.
		claimLog: `WITH p AS (
	SELECT lobby FROM _S_.cursors
	WHERE name = $1 AND head > after AND (claimed_until IS NULL OR claimed_until <= $2)
	ORDER BY since, lobby
	LIMIT $3),
c AS (
	SELECT k.lobby FROM _S_.cursors AS k
	WHERE k.name = $1 AND k.lobby IN (SELECT lobby FROM p)
		AND k.head > k.after AND (k.claimed_until IS NULL OR k.claimed_until <= $2)
	ORDER BY k.lobby
	FOR UPDATE),
u AS (
	UPDATE _S_.cursors AS k SET claimed_until = $4 FROM c
	WHERE k.name = $1 AND k.lobby = c.lobby
	RETURNING k.lobby, k.after, k.since)
SELECT true, lobby, after, since FROM u
UNION ALL
SELECT false, NULL, NULL, NULL WHERE NOT EXISTS (SELECT FROM _S_.consumers WHERE name = $1)`,

		// A lobby without a cursor for the name is left alone (the
		// contract: a commit can only name a position of a cursor the
		// name was given). Cursors stay after their work is done, so that a later write continues from
		// the committed position; they go when their lobby's tombstone
		// folds. $1 name, $2 lobby, $3 after (ordered).
		commitLog: `UPDATE _S_.cursors SET after = greatest(after, $3), claimed_until = NULL
WHERE name = $1 AND lobby = $2`,

		// $1 id, $2 deadline.
		openSession: `INSERT INTO _S_.sessions (id, deadline) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		// Alive at now: before the deadline and not ended; the check and
		// the move are one UPDATE of one row. $1 id, $2 now, $3 deadline.
		renewSession: `UPDATE _S_.sessions SET deadline = greatest(deadline, $3)
WHERE id = $1 AND deadline > $2 AND NOT ended`,
		// $1 id, $2 at.
		endSession: `UPDATE _S_.sessions SET deadline = least(deadline, $2), ended = true WHERE id = $1`,
		// $1 ids.
		sessionDeadlines: `SELECT s.deadline FROM unnest($1::bytea[]) WITH ORDINALITY AS x(id, i)
LEFT JOIN _S_.sessions AS s ON s.id = x.id ORDER BY x.i`,
		// The first $2 due sessions holding a lobby, by the deadline
		// index, and the due sessions holding none that come before the
		// last of them (every due one, if fewer than $2 hold a lobby):
		// those are forgotten, so the walk costs what it lists and
		// forgets. The statement judges "holds none" on its snapshot: a
		// write that commits after it and lists such a session indexes a
		// session forgotten by then, which the contract allows. A renewal
		// racing the DELETE is rechecked against the deadline it set.
		// $1 now, $2 limit.
		expiredSessions: `WITH listed AS (
	SELECT s.id, s.deadline FROM _S_.sessions AS s
	WHERE s.deadline <= $1 AND EXISTS (SELECT FROM _S_.session_lobbies AS l WHERE l.session = s.id)
	ORDER BY s.deadline, s.id
	LIMIT $2),
last AS (
	SELECT deadline, id FROM listed ORDER BY deadline DESC, id DESC LIMIT 1),
gone AS (
	DELETE FROM _S_.sessions AS s
	WHERE s.deadline <= $1
		AND NOT EXISTS (SELECT FROM _S_.session_lobbies AS l WHERE l.session = s.id)
		AND ((SELECT count(*) FROM listed) < $2 OR (s.deadline, s.id) < (SELECT deadline, id FROM last)))
SELECT id, deadline FROM listed ORDER BY deadline, id`,
		// $1 id, $2 after, $3 limit.
		sessionLobbies: `SELECT lobby FROM _S_.session_lobbies WHERE session = $1 AND lobby > $2 ORDER BY lobby LIMIT $3`,
	}
	for _, p := range []*string{
		&q.openSession, &q.renewSession, &q.endSession, &q.sessionDeadlines, &q.expiredSessions, &q.sessionLobbies,
		&q.load, &q.update, &q.write, &q.updateOrWrite, &q.delete, &q.due, &q.claim,
		&q.readLog, &q.logHeads, &q.trimLog, &q.trimKept, &q.isConsumer, &q.register, &q.consumerLock,
		&q.claimLog, &q.commitLog,
	} {
		*p = r.Replace(*p)
	}
	return q
}
