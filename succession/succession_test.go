package succession

import (
	"fmt"
	"testing"
)

func TestPick(t *testing.T) {
	players := []Candidate{
		{Player: "p-41", JoinSeq: 3, Attrs: map[string]string{"role": "player"}},
		{Player: "p-23", JoinSeq: 2, Attrs: map[string]string{"role": "spectator"}},
		{Player: "p-62", JoinSeq: 4, Attrs: map[string]string{"role": "player"}},
	}
	notSpectator := func(c Candidate) bool { return c.Attrs["role"] != "spectator" }
	byIDDesc := func(a, b Candidate) int {
		switch {
		case a.Player > b.Player:
			return -1
		case a.Player < b.Player:
			return 1
		}
		return 0
	}
	tests := []struct {
		name  string
		rule  Rule
		cands []Candidate
		want  string // "" for none
	}{
		{"default picks the lowest join sequence", Default(), players, "p-23"},
		{"eligibility filters before ordering", Rule{Eligible: notSpectator}, players, "p-41"},
		{"custom order", Rule{Compare: byIDDesc}, players, "p-62"},
		{"nobody eligible", Rule{Eligible: func(Candidate) bool { return false }}, players, ""},
		{"no candidates", Default(), nil, ""},
		{
			"equal join sequences fall back to player bytes",
			Default(),
			[]Candidate{{Player: "b", JoinSeq: 1}, {Player: "a", JoinSeq: 1}, {Player: "é", JoinSeq: 1}},
			"a",
		},
		{
			"a custom order that ties falls back to the default order",
			Rule{Compare: func(a, b Candidate) int { return 0 }},
			players,
			"p-23",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := tt.rule.Pick(tt.cands)
			got := ""
			if i >= 0 {
				got = tt.cands[i].Player
			}
			if got != tt.want {
				t.Errorf("Pick = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPickDoesNotDependOnInputOrder(t *testing.T) {
	cands := []Candidate{{Player: "x", JoinSeq: 9}, {Player: "y", JoinSeq: 2}, {Player: "z", JoinSeq: 5}}
	want := "y"
	for rot := 0; rot < len(cands); rot++ {
		c := append(append([]Candidate{}, cands[rot:]...), cands[:rot]...)
		if got := c[Default().Pick(c)].Player; got != want {
			t.Errorf("rotation %d: Pick = %q, want %q", rot, got, want)
		}
	}
}

func ExampleRule() {
	// Spectators never host; among the rest, the earliest joiner does.
	rule := Rule{Eligible: func(c Candidate) bool { return c.Attrs["role"] != "spectator" }}
	cands := []Candidate{
		{Player: "ana", JoinSeq: 1, Attrs: map[string]string{"role": "spectator"}},
		{Player: "bo", JoinSeq: 2},
		{Player: "cy", JoinSeq: 3},
	}
	fmt.Println(cands[rule.Pick(cands)].Player)
	// Output: bo
}
