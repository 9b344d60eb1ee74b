package pgxstore

import (
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lobbyhost/lobbyhost/lobby"
	"github.com/lobbyhost/lobbyhost/lobby/rules"
)

// diffEvents compares event sequences: instants by Equal, nil and empty
// slices alike.
func diffEvents(want, got []lobby.Event) string {
	return gocmp.Diff(want, got, timeEqual, cmpopts.EquateEmpty())
}

func isExpiry(r lobby.Reason) bool {
	return r == lobby.ReasonTimedOut || r == lobby.ReasonLeaseExpired
}

// TestTwoProcessesExpireAHostOnce runs two server processes on one
// database, both serving the same lobbies and heartbeating their own
// players. The host's socket closes; when its grace runs out both sweepers
// go for the expiry. Exactly one commits it (one lease_expired per lobby,
// revisions consecutive and never issued twice), and both processes see
// the same successor at the same revision, in what they publish and in the
// snapshots they take when the store notifies them.
func TestTwoProcessesExpireAHostOnce(t *testing.T) {
	for _, tt := range []struct {
		name     string
		noClaims bool
	}{
		{"claiming", false}, // sweepers divide due lobbies with Store.Claim
		{"racing", true},    // both sweepers tick every due lobby; compare-and-set picks one
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestStore(t)
			cfg := childConfig{
				Schema:    s.Schema(),
				Grace:     300 * time.Millisecond,
				TTL:       2 * time.Second,
				Resync:    500 * time.Millisecond,
				Heartbeat: 300 * time.Millisecond,
				NoClaims:  tt.noClaims,
			}
			g := newGroup(t)
			a, b := g.start("A", cfg), g.start("B", cfg)
			lobbies := []string{"x0", "x1", "x2", "x3", "x4", "x5"}

			// host and m2 connect through A, m1 through B.
			want := map[string][]lobby.Event{}
			hostGen := map[string]uint64{}
			for _, id := range lobbies {
				for _, j := range []struct {
					via    *child
					player string
				}{{a, "host"}, {b, "m1"}, {a, "m2"}} {
					r := j.via.do(childCmd{Op: "join", Lobby: id, Player: j.player})
					want[id] = append(want[id], r.Events...)
					if j.player == "host" {
						hostGen[id] = r.Gen
					}
				}
			}
			for _, id := range lobbies {
				r := a.do(childCmd{Op: "disconnect", Lobby: id, Player: "host", Gen: hostGen[id]})
				want[id] = append(want[id], r.Events...)
				closed := r.Events[len(r.Events)-1]
				want[id] = append(want[id], lobby.Event{
					Lobby:    id,
					Revision: closed.Revision + 1,
					Term:     closed.Term + 1, // the host changes
					Host:     "m1",
					PrevHost: "host",
					Members: []lobby.MemberView{
						{Player: "m1", JoinSeq: 2, Status: lobby.StatusOnline},
						{Player: "m2", JoinSeq: 3, Status: lobby.StatusOnline},
					},
					Reason:  lobby.ReasonLeaseExpired,
					Subject: "host",
					At:      closed.At.Add(cfg.Grace),
				})
			}
			for _, id := range lobbies {
				var reasons []lobby.Reason
				for _, ev := range want[id] {
					reasons = append(reasons, ev.Reason)
				}
				wantReasons := []lobby.Reason{lobby.ReasonJoined, lobby.ReasonJoined, lobby.ReasonJoined, lobby.ReasonDisconnected, lobby.ReasonLeaseExpired}
				if d := gocmp.Diff(wantReasons, reasons); d != "" {
					t.Fatalf("lobby %q: the commands' own events differ from the script (-want +got):\n%s", id, d)
				}
			}

			// Both processes must show every lobby at the successor's
			// revision in the snapshots their wake-ups trigger.
			final := uint64(len(want[lobbies[0]]))
			for _, c := range []*child{a, b} {
				c.waitFor("snapshots of every lobby at the successor's revision", func(ms []childMsg) bool {
					last := map[string]childMsg{}
					for _, m := range filterKind(ms, "snapshot") {
						last[m.Lobby] = m
					}
					for _, id := range lobbies {
						if last[id].Revision != final || last[id].Host != "m1" {
							return false
						}
					}
					return true
				})
			}
			upTo := map[string]uint64{}
			for _, id := range lobbies {
				upTo[id] = final
			}
			g.waitPublished(upTo)
			a.stop()
			b.stop()

			got := g.history()
			for _, id := range lobbies {
				if d := diffEvents(want[id], got[id]); d != "" {
					t.Errorf("lobby %q: published history (-want +got):\n%s", id, d)
				}
			}
			// Every revision was committed exactly once, by one of the two.
			committed := map[string][]uint64{}
			expiredBy := map[string][]string{}
			for _, c := range []*child{a, b} {
				for _, m := range commitsOf(c) {
					for _, ev := range m.Events {
						committed[m.Lobby] = append(committed[m.Lobby], ev.Revision)
						if ev.Reason == lobby.ReasonLeaseExpired {
							expiredBy[m.Lobby] = append(expiredBy[m.Lobby], c.name)
						}
					}
				}
			}
			for _, id := range lobbies {
				revs := committed[id]
				slices.Sort(revs)
				if d := gocmp.Diff([]uint64{1, 2, 3, 4, 5}, revs); d != "" {
					t.Errorf("lobby %q: revisions committed by the two processes (-want +got):\n%s", id, d)
				}
				if len(expiredBy[id]) != 1 {
					t.Errorf("lobby %q: lease_expired committed by %v, want exactly one process", id, expiredBy[id])
				}
			}
			retries := 0
			for _, c := range []*child{a, b} {
				retries += len(c.messages("retry"))
			}
			t.Logf("expiries committed by: %v; %d commands retried after a conflict", expiredBy, retries)
			// A process's snapshots of a lobby never go back, and each
			// revision shows its own host.
			for _, c := range []*child{a, b} {
				prev := map[string]uint64{}
				for _, m := range c.messages("snapshot") {
					if m.Revision < prev[m.Lobby] {
						t.Errorf("child %s: snapshot of %q went back from revision %d to %d", c.name, m.Lobby, prev[m.Lobby], m.Revision)
					}
					prev[m.Lobby] = m.Revision
					if m.Revision == 0 {
						continue // taken before the first join committed
					}
					if m.Revision > uint64(len(want[m.Lobby])) {
						t.Errorf("child %s: snapshot of %q at revision %d, beyond the last one committed (%d)", c.name, m.Lobby, m.Revision, len(want[m.Lobby]))
						continue
					}
					if wantHost := want[m.Lobby][m.Revision-1].Host; m.Host != wantHost {
						t.Errorf("child %s: snapshot of %q at revision %d shows host %q, want %q", c.name, m.Lobby, m.Revision, m.Host, wantHost)
					}
				}
			}
		})
	}
}

// scripted is one command of a script and the time it ran at.
type scripted struct {
	cmd rules.Command
	at  time.Time
}

// TestKilledProcessLeasesExpireFromStoredDeadlines kills (SIGKILL) a server
// process right after it committed disconnects whose graces, and the
// heartbeat deadlines of the connections it held, all lie ahead. Another
// process then applies every overdue transition from the deadlines in the
// store: a survivor at their deadlines, or a process started after all of
// them passed, in its first sweep. Either way each lobby's event sequence
// (revisions, reasons, subjects, hosts, members, At stamps) equals that of
// an uninterrupted run of the same commands at the same times, which the
// pure rules.Machine computes.
func TestKilledProcessLeasesExpireFromStoredDeadlines(t *testing.T) {
	t.Run("restarted", func(t *testing.T) { testKilledProcess(t, false) })
	t.Run("survivor", func(t *testing.T) { testKilledProcess(t, true) })
}

func testKilledProcess(t *testing.T, survivor bool) {
	s := newTestStore(t)
	// No heartbeats: every deadline then follows from the times of the
	// script's own commands, which their events report.
	cfg := childConfig{
		Schema: s.Schema(),
		Grace:  time.Second,
		TTL:    2 * time.Second,
		Resync: 500 * time.Millisecond,
	}
	g := newGroup(t)
	a := g.start("A", cfg)
	var b *child
	if survivor {
		b = g.start("B", cfg)
	}
	type step struct {
		op, lobby, player string
		viaB              bool
	}
	var script []step
	joins := map[string][]string{"k0": {"host", "m1", "m2"}, "k1": {"host", "m1"}, "k2": {"host", "m1", "m2"}}
	closes := map[string][]string{"k0": {"host"}, "k1": {"m1", "host"}, "k2": {"m1", "host"}}
	lobbies := []string{"k0", "k1", "k2"}
	for _, id := range lobbies {
		for _, p := range joins[id] {
			script = append(script, step{"join", id, p, false})
		}
		if survivor {
			script = append(script, step{"join", id, "s", true})
		}
	}
	for _, id := range lobbies {
		for _, p := range closes[id] {
			script = append(script, step{"disconnect", id, p, false})
		}
	}

	ran := map[string][]scripted{}
	replies := map[string][]lobby.Event{}
	gens := map[[2]string]uint64{}
	for _, st := range script {
		via := a
		if st.viaB {
			via = b
		}
		key := [2]string{st.lobby, st.player}
		r := via.do(childCmd{Op: st.op, Lobby: st.lobby, Player: st.player, Gen: gens[key]})
		if len(r.Events) == 0 {
			t.Fatalf("%s %s/%s: no event; every step of the script is a visible change", st.op, st.lobby, st.player)
		}
		at := r.Events[len(r.Events)-1].At // the command's own event comes last
		cmd := rules.Join(st.player, nil)
		if st.op == "disconnect" {
			cmd = rules.Disconnect(st.player, gens[key])
		}
		gens[key] = r.Gen
		ran[st.lobby] = append(ran[st.lobby], scripted{cmd, at})
		replies[st.lobby] = append(replies[st.lobby], r.Events...)
	}
	a.kill()
	killed := time.Now()

	// The uninterrupted run: the same commands at the same times, then
	// every deadline at its own time.
	m, err := rules.NewMachine(childPolicy(cfg))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]lobby.Event{}
	expiries := map[string][]lobby.Event{}
	final := map[string]*rules.State{}
	var firstDeadline, lastDeadline time.Time
	for _, id := range lobbies {
		st := rules.NewState(id, 0)
		for _, sc := range ran[id] {
			res, err := m.Apply(st, sc.cmd, sc.at)
			if err != nil {
				t.Fatalf("replaying %v on %q: %v", sc.cmd, id, err)
			}
			want[id] = append(want[id], res.Events...)
		}
		if d := diffEvents(want[id], replies[id]); d != "" {
			t.Fatalf("lobby %q: the commands' events differ from their replay (-replay +process):\n%s", id, d)
		}
		if d := st.NextDeadline(); firstDeadline.IsZero() || d.Before(firstDeadline) {
			firstDeadline = d
		}
		for d := st.NextDeadline(); !d.IsZero(); d = st.NextDeadline() {
			res, err := m.Apply(st, rules.Tick(), d)
			if err != nil {
				t.Fatal(err)
			}
			expiries[id] = append(expiries[id], res.Events...)
			lastDeadline = d
		}
		want[id] = append(want[id], expiries[id]...)
		if len(st.Members) != 0 || len(expiries[id]) == 0 {
			t.Fatalf("lobby %q: the script must leave expiries behind and end empty; replay ends with %d members after %d expiries", id, len(st.Members), len(expiries[id]))
		}
		final[id] = st
	}
	for _, m := range commitsOf(a) {
		for _, ev := range m.Events {
			if isExpiry(ev.Reason) {
				t.Fatalf("A committed %s of %q at revision %d before it was killed: the machine was too slow for the 1s grace, "+
					"and the test did not test what it should", ev.Reason, ev.Lobby, ev.Revision)
			}
		}
	}

	finisher := b
	if !survivor {
		// Down while every deadline passes, then a fresh process.
		time.Sleep(time.Until(lastDeadline) + 100*time.Millisecond)
		finisher = g.start("A'", cfg)
	}
	upTo := map[string]uint64{}
	for _, id := range lobbies {
		upTo[id] = final[id].Revision
	}
	g.waitPublished(upTo)
	// A peer's relay can publish an event as soon as its write commits,
	// before the writer has heard back; stopping the writer then would
	// cancel that write's round trip and leave its commit unreported. Wait
	// for the finisher to report every expiry it committed.
	g.waitFor(finisher.name+"'s report of every expiry it committed", func() bool {
		have := map[string]map[uint64]bool{}
		for _, m := range filterKind(finisher.msgs, "commit") {
			for _, ev := range m.Events {
				if have[m.Lobby] == nil {
					have[m.Lobby] = map[uint64]bool{}
				}
				have[m.Lobby][ev.Revision] = true
			}
		}
		for id, evs := range expiries {
			for _, ev := range evs {
				if !have[id][ev.Revision] {
					return false
				}
			}
		}
		return true
	})
	finisher.stop()

	got := g.history()
	for _, id := range lobbies {
		if d := diffEvents(want[id], got[id]); d != "" {
			t.Errorf("lobby %q: published history (-uninterrupted +after the kill):\n%s", id, d)
		}
	}
	// The process that finished applied every expiry, each exactly once.
	applied := map[string][]lobby.Event{}
	var order []string
	for _, m := range commitsOf(finisher) {
		order = append(order, m.Lobby)
		for _, ev := range m.Events {
			if isExpiry(ev.Reason) {
				applied[m.Lobby] = append(applied[m.Lobby], ev)
			}
		}
	}
	for _, id := range lobbies {
		if d := diffEvents(expiries[id], applied[id]); d != "" {
			t.Errorf("lobby %q: expiries committed by %s (-want +got):\n%s", id, finisher.name, d)
		}
	}
	if !survivor {
		// Its first sweep took every lobby with an overdue deadline, each
		// in one transition (several at once: their order is free).
		want := slices.Clone(lobbies)
		slices.Sort(want)
		slices.Sort(order)
		if d := gocmp.Diff(want, order); d != "" {
			t.Errorf("lobbies committed by the restarted process (-want +got):\n%s", d)
		}
	}
	// The store holds the replay's final state.
	ctx := ctxT(t)
	for _, id := range lobbies {
		rec, err := s.Load(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		st, err := rules.DecodeState(rec.Data)
		if err != nil {
			t.Fatal(err)
		}
		type view struct {
			Revision, NextJoinSeq, NextGen uint64
			Host                           string
			Members                        []lobby.MemberView
			Deadline                       time.Time
		}
		wantV := view{final[id].Revision, final[id].NextJoinSeq, final[id].NextGen, final[id].Host, final[id].View(), final[id].NextDeadline()}
		gotV := view{st.Revision, st.NextJoinSeq, st.NextGen, st.Host, st.View(), st.NextDeadline()}
		if d := gocmp.Diff(wantV, gotV, timeEqual, cmpopts.EquateEmpty()); d != "" {
			t.Errorf("lobby %q: stored state (-uninterrupted +after the kill):\n%s", id, d)
		}
	}
	t.Logf("%s applied %d expiries; the deadlines were %v to %v after the kill",
		finisher.name, countEvents(expiries), firstDeadline.Sub(killed).Round(time.Millisecond), lastDeadline.Sub(killed).Round(time.Millisecond))
}

func countEvents(m map[string][]lobby.Event) int {
	n := 0
	for _, evs := range m {
		n += len(evs)
	}
	return n
}
