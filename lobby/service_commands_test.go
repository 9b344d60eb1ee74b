package lobby_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// TestServiceGameCommands: Update, Kick, Lock and Configure through the
// Service, as a second process sees them in its snapshot and its watcher.
func TestServiceGameCommands(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock)
	b := newService(t, mem, clock)
	runService(t, b) // b hears of a's commits through the store's notifications
	must(t)(a.Join(ctx, "l", "host", nil))
	must(t)(a.Join(ctx, "l", "guest", nil))
	w := watch(t, b, "l", 2)

	must(t)(a.Update(ctx, "l", "guest", map[string]string{"role": "mage"}))
	must(t)(a.Lock(ctx, "l", "host"))
	if _, err := b.Join(ctx, "l", "stranger", nil); !errors.Is(err, lobby.ErrLocked) {
		t.Fatalf("join of a locked lobby: %v, want ErrLocked", err)
	}
	if _, err := b.Kick(ctx, "l", "guest", "host", 0); !errors.Is(err, lobby.ErrNotHost) {
		t.Fatalf("kick by a guest: %v, want ErrNotHost", err)
	}
	must(t)(a.Configure(ctx, "l", lobby.Overrides{}.WithMaxMembers(2)))
	must(t)(a.Kick(ctx, "l", "host", "guest", time.Minute))
	// The watcher in the other process saw each change, in order.
	var got []string
	for len(got) < 4 {
		got = append(got, reasons(next(t, w))...)
	}
	want := []string{"3:updated:guest", "4:locked:host", "5:configured:", "6:kicked:guest"}
	if len(got) != len(want) {
		t.Fatalf("watched %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("watched %v, want %v", got, want)
		}
	}
	must(t)(a.Unlock(ctx, "l", ""))
	if _, err := b.Join(ctx, "l", "guest", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("join of a kicked player within the block: %v, want ErrBlocked", err)
	}
	snap, err := b.Snapshot(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Locked || !snap.Overrides.Has(lobby.OverrideMaxMembers) || snap.Overrides.MaxMembers != 2 || len(snap.Members) != 1 {
		t.Fatalf("snapshot %+v, want unlocked, capped at 2, one member", snap)
	}
	// The empty lobby is reclaimed with a block in force; the block
	// outlives it.
	must(t)(a.Leave(ctx, "l", "host"))
	if err := a.Reclaim(ctx, "l"); err != nil {
		t.Fatalf("Reclaim with a block in force: %v", err)
	}
	if _, err := mem.Load(ctx, "l"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record after Reclaim: %v, want none", err)
	}
	if _, err := b.Join(ctx, "l", "guest", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("join of the kicked player after reclaim, within the block: %v, want ErrBlocked", err)
	}
	clock.Advance(time.Minute)
	res := must(t)(b.Join(ctx, "l", "guest", nil))
	if res.Revision <= snap.Revision+1 {
		t.Fatalf("rejoin after reclaim at revision %d, want above %d", res.Revision, snap.Revision+1)
	}
	snap = snapshot(t, b, "l")
	if snap.Locked || !snap.Overrides.IsZero() {
		t.Fatalf("a reclaimed lobby came back with %+v, want no lock and no overrides", snap)
	}
}

// TestHostLockEndsWithLastMemberThroughService: a host locks, kicks the
// other member with a day's block and leaves. The lobby is not left shut:
// the leave's event shows it unlocked, another process admits the former
// host again, and the kicked player stays refused until its block ends.
func TestHostLockEndsWithLastMemberThroughService(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	a := newService(t, mem, clock)
	b := newService(t, mem, clock)
	must(t)(a.Join(ctx, "l", "host", nil))
	must(t)(a.Join(ctx, "l", "guest", nil))
	must(t)(a.Lock(ctx, "l", "host"))
	must(t)(a.Kick(ctx, "l", "host", "guest", 24*time.Hour))
	res := must(t)(a.Leave(ctx, "l", "host"))
	if len(res.Events) != 1 || res.Events[0].Reason != lobby.ReasonLeft || res.Events[0].Locked {
		t.Fatalf("the last member's leave: %+v, want one left event showing the lobby unlocked", res.Events)
	}
	if snap := snapshot(t, b, "l"); snap.Locked || len(snap.Members) != 0 {
		t.Fatalf("snapshot after the host left: %+v, want empty and unlocked", snap)
	}
	clock.Advance(time.Hour)
	must(t)(b.Join(ctx, "l", "host", nil))
	if _, err := b.Join(ctx, "l", "guest", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("the kicked player within its block: %v, want ErrBlocked", err)
	}
	clock.Advance(23 * time.Hour)
	must(t)(b.Join(ctx, "l", "guest", nil))
}

func snapshot(t *testing.T, svc *lobby.Service, id string) lobby.Snapshot {
	t.Helper()
	snap, err := svc.Snapshot(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func sweep(t *testing.T, svc *lobby.Service) {
	t.Helper()
	if _, err := svc.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEmptyLobbyTTL(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	mem := memstore.New()
	svc := newService(t, mem, clock, lobby.WithEmptyLobbyTTL(time.Minute))
	must(t)(svc.Join(ctx, "gone", "a", nil))
	must(t)(svc.Leave(ctx, "gone", "a"))
	must(t)(svc.Join(ctx, "blocked", "host", nil))
	must(t)(svc.Join(ctx, "blocked", "b", nil))
	must(t)(svc.Kick(ctx, "blocked", "host", "b", 5*time.Minute))
	must(t)(svc.Leave(ctx, "blocked", "host"))
	must(t)(svc.Join(ctx, "busy", "a", nil))

	clock.Advance(time.Minute - time.Nanosecond)
	sweep(t, svc)
	if _, err := mem.Load(ctx, "gone"); err != nil {
		t.Fatalf("an empty lobby was reclaimed before its TTL: %v", err)
	}
	clock.Advance(time.Nanosecond)
	sweep(t, svc)
	if _, err := mem.Load(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty lobby after its TTL: %v, want it reclaimed", err)
	}
	// Blocks in force do not hold a lobby back: the tombstone keeps them.
	if _, err := mem.Load(ctx, "blocked"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("empty lobby with a block in force after its TTL: %v, want it reclaimed", err)
	}
	if _, err := mem.Load(ctx, "busy"); err != nil {
		t.Fatalf("a lobby with a member was reclaimed: %v", err)
	}
	if _, err := svc.Join(ctx, "blocked", "b", nil); !errors.Is(err, lobby.ErrBlocked) {
		t.Fatalf("the kicked player after its lobby was reclaimed: %v, want ErrBlocked", err)
	}
	must(t)(svc.Join(ctx, "blocked", "host", nil))
	clock.Advance(4 * time.Minute)
	must(t)(svc.Join(ctx, "blocked", "b", nil))
	// A lobby created again continues above what it issued.
	if res := must(t)(svc.Join(ctx, "gone", "a", nil)); res.Revision <= 2 || res.Gen <= 1 || res.JoinSeq <= 1 {
		t.Fatalf("re-created lobby: %+v, want revision above 2, generation and join sequence above 1", res)
	}
}

func TestSnapshotJSON(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newService(t, memstore.New(), clock)
	g := must(t)(svc.Join(ctx, "l", "a", map[string]string{"role": "tank"})).Gen
	must(t)(svc.Join(ctx, "l", "b", nil))
	must(t)(svc.Disconnect(ctx, "l", "a", g))
	must(t)(svc.Configure(ctx, "l", lobby.Overrides{}.WithGrace(20*time.Second)))
	snap := snapshot(t, svc, "l")
	got, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"lobby":"l","revision":4,"term":1,"host":"a","locked":false,"overrides":{"grace_ms":20000},` +
		`"members":[{"player":"a","join_seq":1,"status":"reconnecting","attrs":{"role":"tank"},"reconnect_deadline":"2026-11-29T12:00:08Z"},` +
		`{"player":"b","join_seq":2,"status":"online"}]}`
	if string(got) != want {
		t.Fatalf("snapshot JSON\n got %s\nwant %s", got, want)
	}
	empty, err := json.Marshal(snapshot(t, svc, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"lobby":"nobody","revision":0,"term":0,"host":"","locked":false,"members":[]}`; string(empty) != want {
		t.Fatalf("empty snapshot JSON\n got %s\nwant %s", empty, want)
	}
}
