package lease

import (
	"sync"
	"time"
)

// Advisor helps choose a grace from what actually happens: it records how
// long players who came back took to reconnect, and how many never came back
// within the grace in force, and suggests the grace that would have covered a
// given share of the returns.
//
// An Advisor only observes; it never changes a policy. Feed it from your
// event stream (the time between a member's disconnected or timed_out event
// and its reconnected event) and read its suggestion when you tune the
// configuration. The zero Advisor is ready to use and safe for concurrent
// use.
type Advisor struct {
	mu      sync.Mutex
	buckets [advisorBuckets]uint64 // buckets[i]: gaps in (bound(i-1), bound(i)]
	returns uint64
	expired uint64
}

// Bucket upper bounds grow by a quarter each step from 50 ms, so a
// suggestion is at most 25% above the exact quantile; the last bucket holds
// everything longer than about ten minutes.
const advisorBuckets = 56

func advisorBound(i int) time.Duration {
	d := 50 * time.Millisecond
	for ; i > 0; i-- {
		d += d / 4
	}
	return d
}

// ObserveReturn records that a player reconnected gap after its last
// connection ended. Negative gaps count as zero.
func (a *Advisor) ObserveReturn(gap time.Duration) {
	i := 0
	for i < advisorBuckets-1 && gap > advisorBound(i) {
		i++
	}
	a.mu.Lock()
	a.buckets[i]++
	a.returns++
	a.mu.Unlock()
}

// ObserveExpiry records that a member's grace ran out before it came back.
func (a *Advisor) ObserveExpiry() {
	a.mu.Lock()
	a.expired++
	a.mu.Unlock()
}

// Advice is what an Advisor suggests.
type Advice struct {
	// Grace covers at least the requested share of the observed returns
	// (rounded up to the advisor's bucket bound). Zero when nothing was
	// observed.
	Grace time.Duration
	// Returns and Expiries count the observations behind the advice.
	Returns, Expiries uint64
}

// Suggest returns the smallest bucketed grace that covers the share q
// (0 < q <= 1, clamped into that range) of observed returns. Returns that
// took longer than the grace in force were never observed as returns (they
// came back as fresh joins), so read Expiries beside the suggestion: many
// expiries with a suggestion close to the current grace mean the grace is
// cutting returns short.
func (a *Advisor) Suggest(q float64) Advice {
	a.mu.Lock()
	defer a.mu.Unlock()
	adv := Advice{Returns: a.returns, Expiries: a.expired}
	if a.returns == 0 {
		return adv
	}
	if q <= 0 || q != q { // q != q: NaN
		q = 1e-9
	}
	if q > 1 {
		q = 1
	}
	need := uint64(q * float64(a.returns))
	if float64(need) < q*float64(a.returns) {
		need++
	}
	if need == 0 {
		need = 1
	}
	var seen uint64
	for i, n := range a.buckets {
		seen += n
		if seen >= need {
			adv.Grace = advisorBound(i)
			return adv
		}
	}
	adv.Grace = advisorBound(advisorBuckets - 1)
	return adv
}
