package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lobbyhost/lobbyhost/store"
)

// storeMethods are the values of the method label of
// lobbyhost_store_calls_total, one per store call the server counts.
var storeMethods = []string{"Load", "Write", "WriteBatch", "Delete", "Due", "Claim", "ReadLog", "LogHeads", "TrimLog", "ClaimLog", "CommitLog", "RegisterConsumer",
	"OpenSession", "RenewSession", "EndSession", "SessionDeadlines", "ExpiredSessions", "SessionLobbies"}

// countingStore passes every call to the store it wraps and counts it by
// method, so that /metrics shows what the server costs its store (e.g.
// reads per visible change). Subscribe is passed on uncounted: it is set
// up once, not called per change.
type countingStore struct {
	inner store.Store
	calls map[string]prometheus.Counter
}

// countStore wraps st in a countingStore that counts into vec. The result
// offers exactly the capabilities of st (store.Claimer, store.Notifier,
// store.BatchWriter, store.Sessions), so the lobby Service makes the same
// choices as with st itself.
func countStore(st store.Store, vec *prometheus.CounterVec) store.Store {
	c := &countingStore{inner: st, calls: make(map[string]prometheus.Counter, len(storeMethods))}
	for _, m := range storeMethods {
		c.calls[m] = vec.WithLabelValues(m)
	}
	caps := store.Of(st)
	if caps.Claimer != nil {
		caps.Claimer = countingClaimer{caps.Claimer, c.calls["Claim"]}
	}
	if caps.BatchWriter != nil {
		caps.BatchWriter = countingBatcher{caps.BatchWriter, c.calls["WriteBatch"]}
	}
	if caps.Sessions != nil {
		caps.Sessions = countingSessions{caps.Sessions, c.calls}
	}
	return store.ComposeWith(c, caps)
}

// countingSessions counts the session calls: one renewal per process per
// third of the session TTL is what the store pays for liveness.
type countingSessions struct {
	inner store.Sessions
	calls map[string]prometheus.Counter
}

func (c countingSessions) OpenSession(ctx context.Context, id string, deadline time.Time) error {
	c.calls["OpenSession"].Inc()
	return c.inner.OpenSession(ctx, id, deadline)
}

func (c countingSessions) RenewSession(ctx context.Context, id string, now, deadline time.Time) error {
	c.calls["RenewSession"].Inc()
	return c.inner.RenewSession(ctx, id, now, deadline)
}

func (c countingSessions) EndSession(ctx context.Context, id string, at time.Time) error {
	c.calls["EndSession"].Inc()
	return c.inner.EndSession(ctx, id, at)
}

func (c countingSessions) SessionDeadlines(ctx context.Context, ids []string) ([]time.Time, error) {
	c.calls["SessionDeadlines"].Inc()
	return c.inner.SessionDeadlines(ctx, ids)
}

func (c countingSessions) ExpiredSessions(ctx context.Context, now time.Time, limit int) ([]store.SessionDeadline, error) {
	c.calls["ExpiredSessions"].Inc()
	return c.inner.ExpiredSessions(ctx, now, limit)
}

func (c countingSessions) SessionLobbies(ctx context.Context, id, after string, limit int) ([]string, error) {
	c.calls["SessionLobbies"].Inc()
	return c.inner.SessionLobbies(ctx, id, after, limit)
}

// countingBatcher counts a batch as one call: it is one round trip.
type countingBatcher struct {
	inner store.BatchWriter
	n     prometheus.Counter
}

func (c countingBatcher) WriteBatch(ctx context.Context, ws []store.Write) []error {
	c.n.Inc()
	return c.inner.WriteBatch(ctx, ws)
}

type countingClaimer struct {
	inner store.Claimer
	n     prometheus.Counter
}

func (c countingClaimer) Claim(ctx context.Context, now time.Time, limit int, hold time.Duration) ([]store.Due, error) {
	c.n.Inc()
	return c.inner.Claim(ctx, now, limit, hold)
}

func (c *countingStore) Load(ctx context.Context, id string) (store.Record, error) {
	c.calls["Load"].Inc()
	return c.inner.Load(ctx, id)
}

func (c *countingStore) Write(ctx context.Context, w store.Write) error {
	c.calls["Write"].Inc()
	return c.inner.Write(ctx, w)
}

func (c *countingStore) Delete(ctx context.Context, d store.Deletion) error {
	c.calls["Delete"].Inc()
	return c.inner.Delete(ctx, d)
}

func (c *countingStore) Due(ctx context.Context, now time.Time, limit int) ([]store.Due, error) {
	c.calls["Due"].Inc()
	return c.inner.Due(ctx, now, limit)
}

func (c *countingStore) ReadLog(ctx context.Context, id string, after uint64, limit int) ([]store.Entry, error) {
	c.calls["ReadLog"].Inc()
	return c.inner.ReadLog(ctx, id, after, limit)
}

func (c *countingStore) LogHeads(ctx context.Context, ids []string) ([]uint64, error) {
	c.calls["LogHeads"].Inc()
	return c.inner.LogHeads(ctx, ids)
}

func (c *countingStore) TrimLog(ctx context.Context, now time.Time, limit int) (int, error) {
	c.calls["TrimLog"].Inc()
	return c.inner.TrimLog(ctx, now, limit)
}

func (c *countingStore) ClaimLog(ctx context.Context, name string, now time.Time, limit int, hold time.Duration) ([]store.Cursor, error) {
	c.calls["ClaimLog"].Inc()
	return c.inner.ClaimLog(ctx, name, now, limit, hold)
}

func (c *countingStore) RegisterConsumer(ctx context.Context, name string) error {
	c.calls["RegisterConsumer"].Inc()
	return c.inner.RegisterConsumer(ctx, name)
}

func (c *countingStore) CommitLog(ctx context.Context, name, id string, after uint64) error {
	c.calls["CommitLog"].Inc()
	return c.inner.CommitLog(ctx, name, id, after)
}
