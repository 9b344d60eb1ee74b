package main

import (
	"bytes"
	"testing"

	"github.com/lobbyhost/lobbyhost/shadow"
)

// The simulated day provokes every known cause of disagreement; each must
// be explained by its class. An unexplained disagreement is a defect in the
// classifier or in lobbyhost, and fails the test with its timeline.
func TestDayHasNoUnexplainedDisagreement(t *testing.T) {
	rep, stats, err := simulate(defaultDay)
	if err != nil {
		t.Fatal(err)
	}
	for _, what := range []string{"reconnect inside the grace", "late close after a reconnect", "vanished tab", "server crash", "socket lost in a crash"} {
		if stats[what] == 0 {
			t.Errorf("the day had no %s", what)
		}
	}
	if n := rep.Count(shadow.Unexplained); n > 0 {
		var b bytes.Buffer
		_ = rep.WriteText(&b, true)
		t.Errorf("%d unexplained disagreements:\n%s", n, b.String())
	}
	for _, c := range []shadow.Class{shadow.StaleClose, shadow.Grace, shadow.MissingHeartbeat, shadow.Ordering} {
		if rep.Count(c) == 0 {
			t.Errorf("no disagreement classified %s; the day provokes it", c)
		}
	}
	if rep.Disagreements == 0 || rep.Comparisons < rep.Disagreements {
		t.Errorf("%d comparisons, %d disagreements", rep.Comparisons, rep.Disagreements)
	}
}

// The day is a function of its seed: two runs print the same report.
func TestDayIsDeterministic(t *testing.T) {
	d := defaultDay
	d.sessions = 60
	var out [2]bytes.Buffer
	for i := range out {
		rep, _, err := simulate(d)
		if err != nil {
			t.Fatal(err)
		}
		if err := rep.WriteText(&out[i], true); err != nil {
			t.Fatal(err)
		}
	}
	if out[0].String() != out[1].String() {
		t.Fatal("two runs of the same day printed different reports")
	}
}

// Other seeds are explained too (a few, to keep the test short).
func TestOtherDaysHaveNoUnexplainedDisagreement(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		d := defaultDay
		d.seed, d.sessions = seed, 80
		rep, _, err := simulate(d)
		if err != nil {
			t.Fatal(err)
		}
		if n := rep.Count(shadow.Unexplained); n > 0 {
			var b bytes.Buffer
			_ = rep.WriteText(&b, true)
			t.Errorf("seed %d: %d unexplained disagreements:\n%s", seed, n, b.String())
		}
	}
}
