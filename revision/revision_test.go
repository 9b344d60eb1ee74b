package revision

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

func TestObserve(t *testing.T) {
	tests := []struct {
		name string
		in   []uint64
		want []Verdict
		high uint64
	}{
		{"in order", []uint64{1, 2, 3}, []Verdict{Next, Next, Next}, 3},
		{"first seen may start anywhere", []uint64{7, 8}, []Verdict{Next, Next}, 8},
		{"duplicate is stale", []uint64{4, 4}, []Verdict{Next, Stale}, 4},
		{"older is stale", []uint64{5, 3}, []Verdict{Next, Stale}, 5},
		{"skip is a gap", []uint64{1, 4, 2, 5}, []Verdict{Next, Gap, Stale, Next}, 5},
		{"zero is a valid first revision", []uint64{0, 1}, []Verdict{Next, Next}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tr Tracker
			for i, rev := range tt.in {
				if got := tr.Observe(rev); got != tt.want[i] {
					t.Errorf("Observe(%d) #%d = %v, want %v", rev, i, got, tt.want[i])
				}
			}
			if h, ok := tr.Highest(); !ok || h != tt.high {
				t.Errorf("Highest() = %d, %v; want %d, true", h, ok, tt.high)
			}
		})
	}
}

// TestTrackerNeverMovesBackward feeds arbitrary permutations with duplicates
// and checks the tracker against the obvious model: the running maximum.
func TestTrackerNeverMovesBackward(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		revs := rapid.SliceOf(rapid.Uint64Range(0, 50)).Draw(t, "revs")
		var tr Tracker
		var max uint64
		seen := false
		for _, r := range revs {
			v := tr.Observe(r)
			wantAccepted := !seen || r > max
			if v.Accepted() != wantAccepted {
				t.Fatalf("Observe(%d) after max %d (seen %v) = %v", r, max, seen, v)
			}
			if wantAccepted {
				if seen && r > max+1 && v != Gap {
					t.Fatalf("Observe(%d) after %d = %v, want gap", r, max, v)
				}
				max, seen = r, true
			}
			if h, _ := tr.Highest(); h != max {
				t.Fatalf("Highest = %d, want %d", h, max)
			}
		}
	})
}

func ExampleTracker() {
	var tr Tracker
	for _, rev := range []uint64{3, 5, 4, 6} { // delivered out of order
		fmt.Println(rev, tr.Observe(rev))
	}
	// Output:
	// 3 next
	// 5 gap
	// 4 stale
	// 6 next
}
