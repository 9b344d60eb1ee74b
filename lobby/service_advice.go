package lobby

import (
	"slices"
	"sync"
	"time"

	"github.com/lobbyhost/lobbyhost/lobby/rules"

	"github.com/lobbyhost/lobbyhost/lease"
)

// WithClientClass makes the Service measure, for each class of client,
// how long members take to come back after their last connection ended and
// how long connections go between heartbeats, so that [Service.Advice] can
// propose a grace and a heartbeat TTL from what actually happens. class
// names the class of a player's client in a lobby, from what the server
// knows (a platform, a network, an app version); keep the classes few. It
// is called after a command completes, outside the lobby's lock, and must
// be fast and safe for concurrent use.
//
// The Service only measures: it never changes its policy from what it
// measures. A Service sees the commands it runs; with several processes,
// each measures its own share.
func WithClientClass(class func(lobby, player string) string) Option {
	return func(c *config) error {
		if class == nil {
			return errNilOption("client class function")
		}
		c.class = class
		return nil
	}
}

// ClassAdvice is what the Service measured for one class of client.
type ClassAdvice struct {
	Class string
	// Grace proposes a grace that covers the requested share of the
	// returns observed (members that came back within the grace in force),
	// with the returns and the graces that ran out (Expiries) behind it.
	// Many expiries next to a proposal close to the grace in force mean the
	// grace cuts returns short.
	Grace lease.Advice
	// HeartbeatGap is the same share of the gaps observed between a
	// connection's consecutive heartbeats (or its attach and its first
	// heartbeat), with the connections that timed out as Expiries. A
	// heartbeat TTL should stay well above it.
	HeartbeatGap lease.Advice
}

// Advice returns, per client class in class order, the proposals for the
// share q of observations (0 < q <= 1; see lease.Advisor.Suggest). It is
// nil without WithClientClass.
func (s *Service) Advice(q float64) []ClassAdvice {
	if s.advice == nil {
		return nil
	}
	return s.advice.suggest(q)
}

// adviceBook holds one pair of advisors per client class.
type adviceBook struct {
	class func(lobby, player string) string
	ttl   time.Duration
	mu    sync.Mutex
	by    map[string]*classAdvisors
}

type classAdvisors struct {
	grace, beats lease.Advisor
}

func newAdviceBook(class func(lobby, player string) string, ttl time.Duration) *adviceBook {
	return &adviceBook{class: class, ttl: ttl, by: map[string]*classAdvisors{}}
}

func (b *adviceBook) of(lobby, player string) *classAdvisors {
	c := b.class(lobby, player)
	b.mu.Lock()
	defer b.mu.Unlock()
	a := b.by[c]
	if a == nil {
		a = &classAdvisors{}
		b.by[c] = a
	}
	return a
}

// record takes what one successful command measured.
func (b *adviceBook) record(lobby string, cmd rules.Command, res Result) {
	if cmd.Op == rules.OpJoin && res.Away > 0 {
		b.of(lobby, cmd.Player).grace.ObserveReturn(res.Away)
	}
	if cmd.Op == rules.OpHeartbeat && res.Slack > 0 && b.ttl > 0 {
		b.of(lobby, cmd.Player).beats.ObserveReturn(max(0, b.ttl-res.Slack))
	}
	for _, e := range res.Ended {
		if e.Cause == EndTimedOut {
			b.of(lobby, e.Player).beats.ObserveExpiry()
		}
	}
	for _, ev := range res.Events {
		if ev.Reason == ReasonLeaseExpired {
			b.of(lobby, ev.Subject).grace.ObserveExpiry()
		}
	}
}

func (b *adviceBook) suggest(q float64) []ClassAdvice {
	b.mu.Lock()
	classes := make([]string, 0, len(b.by))
	for c := range b.by {
		classes = append(classes, c)
	}
	b.mu.Unlock()
	slices.Sort(classes)
	out := make([]ClassAdvice, 0, len(classes))
	for _, c := range classes {
		b.mu.Lock()
		a := b.by[c]
		b.mu.Unlock()
		out = append(out, ClassAdvice{Class: c, Grace: a.grace.Suggest(q), HeartbeatGap: a.beats.Suggest(q)})
	}
	return out
}
