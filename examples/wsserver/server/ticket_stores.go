package server

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/rueidis"
)

// PostgresRedemptions records ticket redemptions in a table of a PostgreSQL
// database that every process of a deployment uses:
//
//	<schema>.wsserver_ticket_redemptions (nonce bytea PRIMARY KEY, keep_until timestamptz)
//
// A redemption is an INSERT ... ON CONFLICT DO NOTHING: the first process to
// insert a nonce wins, any later insert of it (on any process) changes no
// row. Collect deletes the rows kept long enough.
type PostgresRedemptions struct {
	pool  *pgxpool.Pool
	table string // quoted schema.table
}

var _ Redemptions = (*PostgresRedemptions)(nil)

// PostgresRedemptionsTable is the table PostgresRedemptions keeps.
const PostgresRedemptionsTable = "wsserver_ticket_redemptions"

// NewPostgresRedemptions creates the schema and table if missing and
// returns a PostgresRedemptions on them.
func NewPostgresRedemptions(ctx context.Context, pool *pgxpool.Pool, schema string) (*PostgresRedemptions, error) {
	if pool == nil || schema == "" {
		return nil, errors.New("server: PostgresRedemptions needs a pool and a schema")
	}
	p := &PostgresRedemptions{pool: pool, table: pgx.Identifier{schema, PostgresRedemptionsTable}.Sanitize()}
	for _, q := range []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{schema}.Sanitize(),
		`CREATE TABLE IF NOT EXISTS ` + p.table + ` (nonce bytea PRIMARY KEY, keep_until timestamptz NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{PostgresRedemptionsTable + "_keep_until"}.Sanitize() +
			` ON ` + p.table + ` (keep_until)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, fmt.Errorf("server: creating the ticket redemptions table: %w", err)
		}
	}
	return p, nil
}

// Claim inserts nonce. See Redemptions.
func (p *PostgresRedemptions) Claim(ctx context.Context, nonce []byte, keep time.Time) (bool, error) {
	tag, err := p.pool.Exec(ctx, `INSERT INTO `+p.table+` (nonce, keep_until) VALUES ($1, $2) ON CONFLICT DO NOTHING`, nonce, keep)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// collectBatch bounds the rows one Collect deletes, so that a backlog is
// worked off in short statements.
const collectBatch = 10000

// Collect deletes up to collectBatch rows kept until before now. A failure
// is left for the next call.
func (p *PostgresRedemptions) Collect(now time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = p.pool.Exec(ctx, `DELETE FROM `+p.table+` WHERE nonce IN (SELECT nonce FROM `+p.table+
		` WHERE keep_until < $1 LIMIT `+fmt.Sprint(collectBatch)+`)`, now)
}

// RedisRedemptions records ticket redemptions as Redis keys that every
// process of a deployment sees: a redemption is SET key 1 NX PXAT keep, so
// the first process to set a nonce wins and Redis forgets it by itself
// once kept long enough.
type RedisRedemptions struct {
	c      rueidis.Client
	prefix string
}

var _ Redemptions = (*RedisRedemptions)(nil)

// NewRedisRedemptions returns a RedisRedemptions whose keys start with
// prefix (then "ticket:" and the nonce).
func NewRedisRedemptions(c rueidis.Client, prefix string) (*RedisRedemptions, error) {
	if c == nil {
		return nil, errors.New("server: RedisRedemptions needs a client")
	}
	return &RedisRedemptions{c: c, prefix: prefix}, nil
}

// Claim sets the nonce's key if absent. See Redemptions.
func (r *RedisRedemptions) Claim(ctx context.Context, nonce []byte, keep time.Time) (bool, error) {
	key := r.prefix + "ticket:" + base64.RawURLEncoding.EncodeToString(nonce)
	err := r.c.Do(ctx, r.c.B().Set().Key(key).Value("1").Nx().PxatMillisecondsTimestamp(keep.UnixMilli()).Build()).Error()
	switch {
	case rueidis.IsRedisNil(err):
		return false, nil // NX: the key was there
	case err != nil:
		return false, err
	}
	return true, nil
}
