package pgxstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/store"
)

// outboxDDL is the schema of the release before the effects log (the
// outbox), as its Migrate created it. %[1]s is the quoted schema name.
const outboxDDL = `CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE IF NOT EXISTS %[1]s.lobbies (
	id            bytea   PRIMARY KEY,
	version       bigint  NOT NULL,
	deleted       boolean NOT NULL DEFAULT false,
	data          bytea,
	deadline      bigint,
	claimed_until bigint
);
CREATE INDEX IF NOT EXISTS lobbies_due ON %[1]s.lobbies (deadline, id)
	WHERE deadline IS NOT NULL;
CREATE SEQUENCE IF NOT EXISTS %[1]s.outbox_pos;
CREATE TABLE IF NOT EXISTS %[1]s.outbox (
	pos   bigint  NOT NULL,
	idx   integer NOT NULL,
	lobby bytea   NOT NULL,
	seq   bigint  NOT NULL,
	data  bytea,
	PRIMARY KEY (pos, idx)
);
CREATE INDEX IF NOT EXISTS outbox_event ON %[1]s.outbox (lobby, seq);
`

// TestMigrateFromTheOutboxSchema: Migrate upgrades a schema of the outbox
// release in place. Records, deadlines, tombstones and their floors stay as
// they were (also a version above 2^63), the outbox is left alone, and the
// lobbies work with the log at once.
func TestMigrateFromTheOutboxSchema(t *testing.T) {
	pool := testPool(t, 16)
	schema := uniqueSchema(t)
	t.Cleanup(func() { dropSchema(t, pool, schema) })
	ctx := ctxT(t)
	if _, err := pool.Exec(ctx, fmt.Sprintf(outboxDDL, quoteIdent(schema))); err != nil {
		t.Fatal(err)
	}
	s, err := New(pool, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	var high = uint64(1)<<63 + 5
	deadline := time.Unix(1_800_000_000, 7).UTC()
	if _, err := pool.Exec(ctx, s.sql(`INSERT INTO _S_.lobbies (id, version, deleted, data, deadline) VALUES
	('live', 3, false, 'live data', $1), ('gone', $2, true, 'old data', NULL)`), deadline.UnixNano(), int64(high)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, s.sql(`INSERT INTO _S_.outbox (pos, idx, lobby, seq, data) VALUES (nextval('_S_.outbox_pos'), 1, 'live', 3, 'event')`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate over the outbox schema = %v", err)
		}
	}
	if r, err := s.Load(ctx, "live"); err != nil || r.Version != 3 || string(r.Data) != "live data" || !r.Deadline.Equal(deadline) {
		t.Fatalf("Load(live) = %+v, %v", r, err)
	}
	if r, err := s.Load(ctx, "gone"); !errors.Is(err, store.ErrNotFound) || r.Version != high || string(r.Data) != "old data" {
		t.Fatalf("Load(gone) = %+v, %v; want the old tombstone", r, err)
	}
	if r, err := s.Load(ctx, "new"); !errors.Is(err, store.ErrNotFound) || r.Version != 0 {
		t.Fatalf("Load(new) = %+v, %v; want floor 0", r, err)
	}
	if d, err := s.Due(ctx, deadline, 10); err != nil || len(d) != 1 || d[0].ID != "live" {
		t.Fatalf("Due = %v, %v", d, err)
	}
	var events int
	if err := pool.QueryRow(ctx, s.sql(`SELECT count(*) FROM _S_.outbox`)).Scan(&events); err != nil || events != 1 {
		t.Fatalf("outbox rows after Migrate: %d, %v; want the old one left in place", events, err)
	}
	write(t, s, store.Write{ID: "live", Expected: 3, Effects: []byte("4")})
	write(t, s, store.Write{ID: "gone", Expected: high, Effects: []byte("again")})
	write(t, s, store.Write{ID: "new", Effects: []byte("1")})
	for id, v := range map[string]uint64{"live": 4, "gone": high + 1, "new": 1} {
		if got := readLog(t, s, id, 0); len(got) != 1 || got[0].Version != v {
			t.Fatalf("ReadLog(%q) = %+v, want one entry at %d", id, got, v)
		}
	}
	checkCounts(t, s)
}
