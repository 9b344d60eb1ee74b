package faults

import (
	"testing"
	"time"

	"github.com/lobbyhost/lobbyhost/examples/wsserver/faults/history"
)

func TestFenceRefusesOlderTerms(t *testing.T) {
	var f Fence
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		lobby, player string
		term          uint64
		want          bool
	}{
		{"a", "ann", 1, true},
		{"a", "ann", 1, true}, // the same term again
		{"a", "bob", 2, true},
		{"a", "ann", 1, false}, // the old host
		{"b", "cat", 1, true},  // another lobby has its own highest
		{"a", "bob", 2, true},
	}
	for i, s := range steps {
		if got := f.Act(s.lobby, s.player, s.term, now); got != s.want {
			t.Errorf("step %d: %s in %s with term %d: accepted %v, want %v", i, s.player, s.lobby, s.term, got, s.want)
		}
	}
	r := history.Check(history.History{Actions: f.Log()}, history.Bounds{})
	if !r.OK() || r.Refused != 1 || r.Accepted != 5 {
		t.Errorf("checker on the fence's log: %+v", r)
	}

	u := Fence{Unchecked: true}
	u.Act("a", "bob", 2, now)
	if !u.Act("a", "ann", 1, now) {
		t.Fatal("an unchecked fence refused an action")
	}
	if r := history.Check(history.History{Actions: u.Log()}, history.Bounds{}); r.Count()[history.CheckFence] != 1 {
		t.Errorf("the checker missed the unchecked fence's older term: %v", r.Violations)
	}
}
