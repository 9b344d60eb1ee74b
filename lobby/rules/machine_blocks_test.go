package rules

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestNewBlocks(t *testing.T) {
	b := NewBlocks(Block{"c", t0.Add(3)}, Block{"a", t0.Add(1)}, Block{"c", t0.Add(5)}, Block{"b", t0.Add(9)})
	var got []string
	for x := range b.All() {
		got = append(got, fmt.Sprintf("%s+%d", x.Player, x.Until.Sub(t0)))
	}
	if want := []string{"a+1", "b+9", "c+5"}; !slices.Equal(got, want) {
		t.Fatalf("blocks %v, want %v (in player order, the later of c's)", got, want)
	}
	if b.Len() != 3 || !b.Last().Equal(t0.Add(9)) || b.inForce(t0.Add(1)) != 2 || b.inForce(t0) != 3 {
		t.Fatalf("len %d, last %v, in force after 1ns %d", b.Len(), b.Last(), b.inForce(t0.Add(1)))
	}
	if until, ok := b.Until("b"); !ok || !until.Equal(t0.Add(9)) {
		t.Fatalf("Until(b) = %v, %v", until, ok)
	}
	if _, ok := b.Until("d"); ok {
		t.Fatal("Until(d) found a block")
	}
	if !b.Equal(NewBlocks(Block{"b", t0.Add(9)}, Block{"c", t0.Add(5)}, Block{"a", t0.Add(1)})) || b.Equal(Blocks{}) {
		t.Fatal("Equal")
	}
	if e := b.endedBy(t0.Add(5)); e.Len() != 1 || !e.Last().Equal(t0.Add(9)) {
		t.Fatalf("endedBy: %v", e)
	}
	if w := b.with("bb", t0.Add(20), t0.Add(3)); w.String() != NewBlocks(Block{"b", t0.Add(9)}, Block{"bb", t0.Add(20)}, Block{"c", t0.Add(5)}).String() {
		t.Fatalf("with: %v", w)
	}
	var none Blocks
	if none.Len() != 0 || !none.Last().IsZero() || none.endedBy(t0).Len() != 0 || !none.Equal(NewBlocks()) {
		t.Fatal("the zero Blocks")
	}
}

// TestCommandsThatTouchNoBlockDoNoWorkForThem: on a lobby holding a
// thousand blocks, a clone and a heartbeat share the set instead of copying
// or rebuilding it, and a heartbeat allocates no more than on a lobby
// without blocks.
func TestCommandsThatTouchNoBlockDoNoWorkForThem(t *testing.T) {
	lobbyWith := func(blocks int) (*Machine, *State, uint64) {
		p := testPolicy()
		p.HeartbeatTTL = time.Hour
		r := newRun(t, p)
		g := r.join("host")
		for i := range blocks {
			id := fmt.Sprintf("kicked-%04d", i)
			r.join(id)
			r.do(Kick("", id, 24*time.Hour))
		}
		return r.m, r.s, g
	}
	m, s, g := lobbyWith(1000)
	c := s.Clone()
	if c.Blocks.set != s.Blocks.set {
		t.Fatal("Clone copied the blocks")
	}
	before := s.Blocks.set
	now := s.Updated
	heartbeat := func(m *Machine, s *State, g uint64) func() {
		return func() {
			now = now.Add(time.Millisecond)
			if res, err := m.Apply(s, Heartbeat("host", g), now); err != nil || !res.Changed {
				t.Fatalf("heartbeat: %+v %v", res, err)
			}
		}
	}
	heartbeat(m, s, g)()
	if s.Blocks.set != before {
		t.Fatal("a heartbeat rebuilt the blocks")
	}
	m0, s0, g0 := lobbyWith(0)
	with := testing.AllocsPerRun(100, heartbeat(m, s, g))
	without := testing.AllocsPerRun(100, heartbeat(m0, s0, g0))
	if with != without {
		t.Fatalf("a heartbeat allocates %v times with 1,000 blocks, %v without", with, without)
	}
	// Encoding copies the kept bytes: the same as encoding the list anew.
	if got, want := string(s.Blocks.appendTo(nil)), string(appendBlockList(nil, slices.Collect(s.Blocks.All()))); got != want {
		t.Fatal("the kept encoding differs from the list's")
	}
}
