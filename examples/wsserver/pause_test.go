package main

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestMultiProcessPause: three processes on one store; one is stopped
// (SIGSTOP) for longer than its session TTL plus the grace, as a process
// frozen by a long GC pause, a VM migration or a debugger would be. While
// it is frozen the others end its players as of its session's deadline and
// hand its host seats on. When it wakes (SIGCONT) it must give up every
// socket it held (they rejoin), and keep serving: a socket that joins it
// afterwards is shown the lobby as it is, with the successor as host. Every
// socket's stream stays gapless, and every revision reads the same on
// every socket that saw it.
func TestMultiProcessPause(t *testing.T) { mpOnStores(t, pauseRun) }

func pauseRun(t *testing.T, bin string, storeArgs ...string) {
	h := &mpHarness{t: t}
	for i := range 3 {
		h.procs = append(h.procs, mpStart(t, bin, i, storeArgs...))
	}
	for _, p := range h.procs {
		(&process{base: p.base}).healthy(t)
	}
	victim := h.procs[0]
	users := []string{"ann", "bob", "cat"}
	rooms := make([]string, 3)
	for i := range rooms {
		rooms[i] = randomName(fmt.Sprintf("pause%d-", i))
		// The victim's player joins first, so it hosts.
		for j, p := range h.procs {
			if _, err := mpDial(t, h, p, rooms[i], users[j]); err != nil {
				t.Fatal(err)
			}
		}
	}
	var frozen []*mpSock
	for _, s := range h.all() {
		if s.proc == victim {
			frozen = append(frozen, s)
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	t.Logf("stopped process %d holding %d sockets", victim.idx, len(frozen))

	// The survivors hand each of the victim's host seats on.
	for _, room := range rooms {
		var witness *mpSock
		for _, s := range h.live(room) {
			if s.proc != victim {
				witness = s
				break
			}
		}
		ok := false
		limit := time.Now().Add(mpHeartbeatTTL + mpGrace + mpGuard)
		for !ok && time.Now().Before(limit) {
			ok = slices.ContainsFunc(witness.snapshot(), func(st mpState) bool {
				return st.Reason == "lease_expired" && st.subject() == users[0] && st.HostID != nil && *st.HostID == users[1]
			})
			time.Sleep(50 * time.Millisecond) // polling the recorded stream
		}
		if !ok {
			t.Fatalf("%s: %v never saw the frozen host's seat pass to %s", room, witness, users[1])
		}
	}
	t.Logf("every frozen host replaced %v after SIGSTOP", time.Since(stoppedAt).Round(time.Millisecond))
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()

	// It gives up every socket it held, telling each to rejoin (or, if
	// its ping timer noticed first, closing it as silent).
	for _, s := range frozen {
		select {
		case <-s.done:
		case <-time.After(mpGuard):
			t.Fatalf("%v still open %v after SIGCONT", s, mpGuard)
		}
		s.mu.Lock()
		code := s.code
		s.mu.Unlock()
		if code != 4001 && code != 4004 {
			t.Errorf("%v: closed with %d after the pause, want 4001 (rejoin) or 4004", s, code)
		}
		// Nothing it received after waking may show the frozen host
		// still hosting at a revision past the hand-over.
		var handover uint64
		for _, st := range s.snapshot() {
			if st.Reason == "lease_expired" && st.subject() == users[0] {
				handover = st.Version
			}
		}
		for _, st := range s.snapshot() {
			if st.at.After(resumedAt) && handover != 0 && st.Version > handover && st.HostID != nil && *st.HostID == users[0] {
				t.Errorf("%v: revision %d after the hand-over shows %s hosting", s, st.Version, users[0])
			}
		}
	}

	// It serves again, through a new session: a new socket there sees
	// the successor.
	for _, room := range rooms {
		s, err := mpDial(t, h, victim, room, "dan")
		if err != nil {
			t.Fatalf("join %s on the resumed process: %v", room, err)
		}
		f, _ := s.first()
		if f.HostID == nil || *f.HostID != users[1] {
			t.Errorf("%v: first state shows host %v, want %s", s, f.HostID, users[1])
		}
		for _, w := range h.live(room) {
			if w != s && !w.waitFor(func(st mpState) bool { return st.Version >= f.Version }) {
				t.Errorf("%v never received revision %d (dan's join on the resumed process)", w, f.Version)
			}
		}
	}
	mpCheck(t, h, victim)
}
