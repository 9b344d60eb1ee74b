package pgxstore

import (
	"context"
	"time"
)

// Now returns the database server's current time (clock_timestamp(), with
// microsecond resolution) in one round trip. To use the server's clock as
// the time source of lobby.Service, take [NewDBClock], which reads it now
// and then and needs no round trip per call; Now suits a check such as
// alerting on skew. See docs/postgres.md on clock skew.
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
