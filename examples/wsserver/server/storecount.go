package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/lobbyhost/lobbyhost/store"
)

// storeMethods are the values of the method label of
// lobbyhost_store_calls_total, one per store call the server counts.
var storeMethods = []string{"Load", "Write", "WriteBatch", "Delete", "Due", "Claim", "ReadLog", "LogHeads", "TrimLog", "ClaimLog", "CommitLog", "RegisterConsumer"}

// countingStore passes every call to the store it wraps and counts it by
// method, so that /metrics shows what the server costs its store (e.g.
// reads per visible change). Subscribe is passed on uncounted: it is set
// up once, not called per change.
type countingStore struct {
	inner store.Store
	calls map[string]prometheus.Counter
}

// countStore wraps st in a countingStore that counts into vec. The result
// is a store.Claimer, a store.Notifier or a store.BatchWriter exactly when
// st is one, so the lobby Service makes the same choices as with st itself.
func countStore(st store.Store, vec *prometheus.CounterVec) store.Store {
	c := &countingStore{inner: st, calls: make(map[string]prometheus.Counter, len(storeMethods))}
	for _, m := range storeMethods {
		c.calls[m] = vec.WithLabelValues(m)
	}
	var (
		claimer store.Claimer
		batcher store.BatchWriter
	)
	if cl, ok := st.(store.Claimer); ok {
		claimer = countingClaimer{cl, c.calls["Claim"]}
	}
	if bw, ok := st.(store.BatchWriter); ok {
		batcher = countingBatcher{bw, c.calls["WriteBatch"]}
	}
	notifier, _ := st.(store.Notifier)
	return store.Compose(c, claimer, notifier, batcher)
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
