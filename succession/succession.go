// Package succession decides who hosts a lobby when the seat is open: a rule
// made of an eligibility predicate and a strict total order, and the function
// that applies it.
//
// A rule may read only what a lobby stores about each member (the
// Candidate), never the wall clock, the network or another service: the same
// members must always yield the same successor, in every process and on every
// replay.
package succession

import "strings"

// Candidate is what a succession rule may look at: the stored data of one
// member who is online at the moment of the decision.
type Candidate struct {
	// Player is the member's ID.
	Player string
	// JoinSeq is the member's join sequence: lower joined earlier.
	JoinSeq uint64
	// Attrs are the attributes the member gave when it last joined. The
	// rule must not modify the map.
	Attrs map[string]string
}

// Rule picks a successor. The zero Rule is the default: every online member
// is eligible, ordered by join sequence then player ID.
type Rule struct {
	// Eligible reports whether c may host. Nil means every candidate may.
	// It must be a pure function of c.
	Eligible func(c Candidate) bool

	// Compare orders candidates: negative when a should host before b. It
	// must be a strict weak order and a pure function of its arguments;
	// ties are broken by DefaultCompare, so the result is always a strict
	// total order. Nil means DefaultCompare.
	Compare func(a, b Candidate) int
}

// Default returns the default rule: everyone eligible, earliest join first.
func Default() Rule { return Rule{} }

// DefaultCompare orders by join sequence, then by player ID as bytes.
func DefaultCompare(a, b Candidate) int {
	switch {
	case a.JoinSeq < b.JoinSeq:
		return -1
	case a.JoinSeq > b.JoinSeq:
		return 1
	}
	return strings.Compare(a.Player, b.Player)
}

// IsEligible applies the rule's predicate to c.
func (r Rule) IsEligible(c Candidate) bool {
	return r.Eligible == nil || r.Eligible(c)
}

// Less reports whether a comes before b in the rule's total order.
func (r Rule) Less(a, b Candidate) bool {
	if r.Compare != nil {
		if c := r.Compare(a, b); c != 0 {
			return c < 0
		}
	}
	return DefaultCompare(a, b) < 0
}

// Pick returns the index in cands of the eligible candidate that comes first
// in the rule's order, or -1 when none is eligible. Every element of cands
// must already be online; Pick does not reorder or keep cands.
func (r Rule) Pick(cands []Candidate) int {
	best := -1
	for i := range cands {
		if !r.IsEligible(cands[i]) {
			continue
		}
		if best < 0 || r.Less(cands[i], cands[best]) {
			best = i
		}
	}
	return best
}
