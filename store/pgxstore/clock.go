package pgxstore

import (
	"context"
	"time"
)

// Now returns the database server's current time (clock_timestamp(), with
// microsecond resolution), for deployments that prefer one clock shared by
// every process over each process's own. It costs one round trip; a caller
// that uses it as a time source would typically sample it now and then and
// add the local monotonic time elapsed since. See docs/postgres.md on clock
// skew.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if err := s.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t); err != nil {
		return time.Time{}, s.fail(ctx, "now", "", err)
	}
	return t, nil
}
