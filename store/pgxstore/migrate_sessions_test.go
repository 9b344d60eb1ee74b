package pgxstore

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// logDDL is the schema of the release before sessions, as its Migrate
// created it: %[1]s is the quoted schema name, %[2]d the registration lock
// key.
const logDDL = `CREATE SCHEMA IF NOT EXISTS %[1]s;

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
	ELSIF v_count > 0 OR p_keep IS NOT NULL THEN
		UPDATE %[1]s.lobbies
		SET version = p_floor, deleted = true, deadline = NULL, claimed_until = NULL,
			tomb_at = p_at, keep_until = p_keep
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

// TestMigrateFromTheSessionlessSchema: Migrate upgrades a schema of the
// release before sessions in place. Lobbies written by that release keep
// their records and logs and hold no session; afterwards sessions and the
// index work at once, and the write function of that release, which its
// processes still call during a rolling upgrade, keeps a lobby's sessions
// and their index as they were.
func TestMigrateFromTheSessionlessSchema(t *testing.T) {
	pool := testPool(t, 16)
	schema := uniqueSchema(t)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	ctx := ctxT(t)
	if _, err := pool.Exec(ctx, fmt.Sprintf(logDDL, quoteIdent(schema), registerLockKey(schema))); err != nil {
		t.Fatal(err)
	}
	s, err := New(pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	oldWrite := func(id string, expected uint64, data string) {
		t.Helper()
		writeAsEarlierRelease(t, s, id, expected, []byte(data), []byte("e-"+data))
	}
	oldWrite("old", 0, "v1")
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate over the sessionless schema = %v", err)
		}
	}
	if r, err := s.Load(ctx, "old"); err != nil || r.Version != 1 || string(r.Data) != "v1" {
		t.Fatalf("Load(old) = %+v, %v", r, err)
	}
	if got := readLog(t, s, "old", 0); len(got) != 1 || string(got[0].Data) != "e-v1" {
		t.Fatalf("ReadLog(old) = %+v, want the entry written before Migrate", got)
	}
	lobbies := func(session string) []string {
		t.Helper()
		got, err := s.SessionLobbies(ctx, session, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if err := s.OpenSession(ctx, "s", time.Unix(1_800_000_000, 5)); err != nil {
		t.Fatalf("OpenSession after Migrate = %v", err)
	}
	write(t, s, store.Write{ID: "old", Expected: 1, Data: []byte("v2"), Sessions: []string{"s"}})
	write(t, s, store.Write{ID: "new", Data: []byte("n1"), Sessions: []string{"s"}})
	if got := lobbies("s"); !slices.Equal(got, []string{"new", "old"}) {
		t.Fatalf("SessionLobbies(s) = %q, want [new old]", got)
	}
	// A process of the earlier release writes the lobby: the sessions stay.
	oldWrite("old", 2, "v3")
	if got := lobbies("s"); !slices.Equal(got, []string{"new", "old"}) {
		t.Fatalf("SessionLobbies(s) after the earlier release's write = %q, want [new old]", got)
	}
	// And a write of this release that drops the session still finds it.
	write(t, s, store.Write{ID: "old", Expected: 3, Data: []byte("v4")})
	if got := lobbies("s"); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("SessionLobbies(s) = %q, want [new]", got)
	}
	due, err := s.ExpiredSessions(ctx, time.Unix(1_900_000_000, 0), 10)
	if err != nil || len(due) != 1 || due[0].ID != "s" || !due[0].Deadline.Equal(time.Unix(1_800_000_000, 5)) {
		t.Fatalf("ExpiredSessions = %v, %v; want s at its deadline", due, err)
	}
	if err := s.Delete(ctx, store.Deletion{ID: "new", Expected: 1}); err != nil {
		t.Fatal(err)
	}
	if got := lobbies("s"); len(got) != 0 {
		t.Fatalf("SessionLobbies(s) after Delete = %q, want none", got)
	}
	if r, err := s.Load(ctx, "new"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Load(new) = %+v, %v", r, err)
	}
}

// writeAsEarlierRelease writes as a release before sessions does: through
// the thirteen-argument write function (which is every write of that
// release's schema functions; the heartbeat UPDATE it also has touches
// one row only). effects nil writes no entry.
func writeAsEarlierRelease(t *testing.T, s *Store, id string, expected uint64, data, effects []byte) {
	t.Helper()
	next := expected + 1
	entry := effects
	if entry == nil {
		entry = []byte{}
	}
	var ok bool
	if err := s.pool.QueryRow(ctxT(t), s.sql(`SELECT _S_.write($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`),
		[]byte(id), int64(expected), int64(next), toOrdered(expected), toOrdered(next), data, nil,
		effects != nil, int64(1_800_000_000_000_000), entry, int64(0), s.channel, changePayload(id, next)).Scan(&ok); err != nil || !ok {
		t.Fatalf("the earlier release's write(%q, %d) = %v, %v; want true", id, expected, ok, err)
	}
}
