package load

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// idle holds every socket open for cfg.Idle and records the server's store
// calls per second over that time. Heartbeats go on as the server asks: the
// figure is what presence alone costs the store.
func idle(ctx context.Context, c *Client, cfg FailoverConfig, rep *FailoverReport, errs *errorSample) {
	before, ok, err := c.StoreCalls(ctx, cfg.Server)
	if err != nil || !ok {
		if err != nil {
			errs.add(fmt.Errorf("idle: store calls: %w", err))
		}
		before = nil
	}
	start := time.Now()
	select {
	case <-time.After(cfg.Idle):
	case <-ctx.Done():
		return
	}
	rep.IdleSeconds = time.Since(start).Seconds()
	if before == nil {
		return
	}
	after, _, err := c.StoreCalls(ctx, cfg.Server)
	if err != nil {
		errs.add(fmt.Errorf("idle: store calls: %w", err))
		return
	}
	rep.IdleStoreCalls = map[string]float64{}
	for m, v := range after {
		if d := v - before[m]; d > 0 {
			rep.IdleStoreCalls[m] = d / rep.IdleSeconds
		}
	}
	cfg.Logf("idle %.0fs: store calls/s %s", rep.IdleSeconds, formatCalls(rep.IdleStoreCalls))
}

// formatCalls renders calls per second by method, busiest first, and the
// total.
func formatCalls(calls map[string]float64) string {
	methods := slices.SortedFunc(maps.Keys(calls), func(a, b string) int {
		switch {
		case calls[a] > calls[b]:
			return -1
		case calls[a] < calls[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	total := 0.0
	for _, m := range methods {
		fmt.Fprintf(&b, "%s %.2f, ", m, calls[m])
		total += calls[m]
	}
	fmt.Fprintf(&b, "total %.2f", total)
	return b.String()
}
