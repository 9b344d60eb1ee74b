package pgxstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// deletionlessDDL is the schema of the release whose Delete took no
// transition time and no Keep, as its Migrate created it. %[1]s is the
// quoted schema name, %[2]d the registration lock key.
const deletionlessDDL = `CREATE SCHEMA IF NOT EXISTS %[1]s;

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

-- A write that needs more than one statement: the compare-and-set, the log
-- entry, count retention, the consumers' cursors and the notification, in
-- one call. Each statement in it reads a fresh snapshot, taken after the
-- lobby's row is locked, so what it counts and trims is exact. Returns
-- false for a version conflict.
CREATE OR REPLACE FUNCTION %[1]s.write(
	p_id bytea, p_expected bigint, p_next bigint, p_base bigint, p_pos bigint,
	p_data bytea, p_deadline bigint, p_effects boolean, p_at bigint, p_entry bytea,
	p_keep bigint, p_channel text, p_payload text)
RETURNS boolean LANGUAGE plpgsql AS $fn$
DECLARE
	v_count   bigint;
	v_floor   bigint;
	v_top     bigint;
	v_removed bigint;
BEGIN
	IF p_effects THEN
		-- Registration takes this lock exclusively: it waits for the writes
		-- that might not see the new consumer, and later ones wait for it.
		PERFORM pg_advisory_xact_lock_shared(%[2]d);
	END IF;
	UPDATE %[1]s.lobbies
	SET version = p_next, deleted = false, data = p_data, deadline = p_deadline,
		claimed_until = NULL, log_count = log_count + p_effects::int
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
		INSERT INTO %[1]s.lobbies (id, version, data, deadline, trimmed, log_count)
		VALUES (p_id, p_next, p_data, p_deadline, p_base, p_effects::int)
		ON CONFLICT (id) DO NOTHING;
		IF NOT FOUND THEN
			RETURN false;
		END IF;
		v_count := p_effects::int;
	END IF;
	IF NOT p_effects THEN
		RETURN true;
	END IF;
	INSERT INTO %[1]s.log (lobby, version, at, data) VALUES (p_id, p_pos, p_at, p_entry);
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

-- Delete: a tombstone while the lobby has log entries, else no row and the
-- floor folded into store_floor. Returns 'd' (deleted), 'n' (no record) or
-- 'c' (version conflict).
CREATE OR REPLACE FUNCTION %[1]s.delete(
	p_id bytea, p_expected bigint, p_floor bigint, p_floor_ordered bigint)
RETURNS text LANGUAGE plpgsql AS $fn$
DECLARE
	v_version bigint;
	v_deleted boolean;
	v_count   bigint;
BEGIN
	SELECT version, deleted, log_count INTO v_version, v_deleted, v_count
	FROM %[1]s.lobbies WHERE id = p_id FOR UPDATE;
	IF NOT FOUND OR v_deleted THEN
		RETURN 'n';
	ELSIF v_version <> p_expected THEN
		RETURN 'c';
	ELSIF v_count > 0 THEN
		UPDATE %[1]s.lobbies
		SET version = p_floor, deleted = true, deadline = NULL, claimed_until = NULL
		WHERE id = p_id;
	ELSE
		DELETE FROM %[1]s.lobbies WHERE id = p_id;
		UPDATE %[1]s.store_floor SET version = greatest(version, p_floor_ordered);
		DELETE FROM %[1]s.cursors AS c USING %[1]s.consumers AS k
		WHERE c.name = k.name AND c.lobby = p_id
			AND c.head <= c.after AND c.after <= p_floor_ordered;
	END IF;
	RETURN 'd';
END
$fn$;
`

// TestMigrateFromTheDeletionlessSchema: Migrate upgrades a schema of the
// release before Deletion.At and Deletion.Keep in place. A tombstone left
// by that release reports the zero time and keeps its floor and data; the
// old four-argument delete function is gone (a process of that release
// gets an error instead of deleting without a time); Delete, Load and
// TrimLog use the new columns at once.
func TestMigrateFromTheDeletionlessSchema(t *testing.T) {
	pool := testPool(t, 16)
	schema := uniqueSchema(t)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	ctx := ctxT(t)
	s, err := New(pool, WithSchema(schema), WithRetention(store.Retention{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(deletionlessDDL, quoteIdent(schema), registerLockKey(schema))); err != nil {
		t.Fatal(err)
	}
	// The old release's own steps: a lobby with an entry deleted into a
	// tombstone, and one without entries folded at once.
	writeAsEarlierRelease(t, s, "old-tomb", 0, []byte("old data"), []byte("e"))
	writeAsEarlierRelease(t, s, "old-fold", 0, []byte("x"), nil)
	for _, c := range []struct {
		id    string
		floor uint64
	}{{"old-tomb", 1<<63 + 9}, {"old-fold", 6}} {
		var outcome string
		if err := pool.QueryRow(ctx, s.sql(`SELECT _S_.delete($1, 1, $2, $3)`), []byte(c.id), int64(c.floor), toOrdered(c.floor)).Scan(&outcome); err != nil || outcome != "d" {
			t.Fatalf("the old delete of %q = %q, %v", c.id, outcome, err)
		}
	}
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate over the deletionless schema = %v", err)
		}
	}
	if r, err := s.Load(ctx, "old-tomb"); !errors.Is(err, store.ErrNotFound) || r.Version != 1<<63+9 || string(r.Data) != "old data" || !r.At.IsZero() {
		t.Fatalf("Load(old-tomb) = %+v, %v; want the old tombstone with no At", r, err)
	}
	if r, err := s.Load(ctx, "new"); !errors.Is(err, store.ErrNotFound) || r.Version != 6 || !r.At.IsZero() {
		t.Fatalf("Load(new) = %+v, %v; want the old store-wide floor 6 and no At", r, err)
	}
	var outcome string
	if err := pool.QueryRow(ctx, s.sql(`SELECT _S_.delete($1, 1, 1, $2)`), []byte("x"), toOrdered(1)).Scan(&outcome); err == nil {
		t.Fatalf("the old four-argument delete still runs after Migrate (returned %q)", outcome)
	}

	at := time.Date(2031, 5, 6, 7, 8, 9, 123456000, time.UTC)
	keep := at.Add(time.Hour)
	write(t, s, store.Write{ID: "new", Expected: 6, Data: []byte("n")})
	if err := s.Delete(ctx, store.Deletion{ID: "new", Expected: 7, Floor: 40, At: at, Keep: keep}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load(ctx, "new"); !errors.Is(err, store.ErrNotFound) || r.Version != 40 || !r.At.Equal(at) || string(r.Data) != "n" {
		t.Fatalf("Load(new) after a Delete with a Keep = %+v, %v; want its tombstone", r, err)
	}
	if n, err := s.TrimLog(ctx, keep, 10); n != 1 || err != nil {
		t.Fatalf("TrimLog at the Keep = %d, %v; want 1", n, err)
	}
	if r, err := s.Load(ctx, "other"); !errors.Is(err, store.ErrNotFound) || r.Version != 40 || !r.At.Equal(at) {
		t.Fatalf("Load(other) after the fold = %+v, %v; want floor 40 and At %v", r, err, at)
	}
	checkCounts(t, s)
}
