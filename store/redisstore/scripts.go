package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// Every change to a shard runs as one Lua script: Redis runs a script to
// completion before it serves any other command, so the version check and
// every write after it are one atomic step, and a commit costs one round
// trip (EVALSHA). MULTI/EXEC under WATCH would need at least two (WATCH and
// HGET, then the transaction) and a retry loop when another client touches
// the record in between.
//
// The scripts compare versions as decimal strings, never as Lua numbers
// (doubles, exact only to 2^53), and deadlines as fixed-width keys, never
// through Lua's < on strings (strcoll, which follows the server's locale).

// writeScript commits a Write.
//
// With one shard, outbox entry IDs are Redis's own (milliseconds and a
// counter, always after the last ID): stream order is commit order. With
// several, they are the server's clock in microseconds and a counter, so
// that Pending can merge the outboxes of the shards in commit order: writes
// to different shards are told apart unless they commit in the same
// microsecond. If the stream already has a later ID (the clock stepped
// back, or a failover went to a node whose clock is behind), XADD refuses
// the explicit time, and the script lets Redis pick the next ID after the
// last one instead, which keeps the shard's own order.
//
//	KEYS: record, due, out, ix
//	ARGV: expected, new version, data, deadline key or "", lobby ID,
//	      notify channel, "us" for clock-based outbox IDs (else ""),
//	      then seq and data of each event
//
// It returns 1 after writing, or the stored version (a string, "0" for none)
// on a version mismatch, having written nothing.
const writeScript = `
local cur = redis.call('HMGET', KEYS[1], 'v', 't', 'c', 'f')
local v = cur[1] or '0'
if v ~= ARGV[1] then return v end
if cur[4] then redis.call('HDEL', KEYS[1], 'f') end
local id, old, new = ARGV[5], cur[2], ARGV[4]
if old ~= new then
  if old then redis.call('ZREM', KEYS[2], old .. id) end
  if new ~= '' then redis.call('ZADD', KEYS[2], 0, new .. id) end
end
if new ~= '' then
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3], 't', new)
else
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'd', ARGV[3])
  if old then redis.call('HDEL', KEYS[1], 't') end
end
if cur[3] then redis.call('HDEL', KEYS[1], 'c') end
local us = '*'
if ARGV[7] == 'us' and #ARGV > 7 then
  local now = redis.call('TIME')
  us = now[1] .. string.format('%06d', tonumber(now[2])) .. '-*'
end
for i = 8, #ARGV, 2 do
  local seq = ARGV[i]
  local sid = redis.pcall('XADD', KEYS[3], us, 'l', id, 's', seq, 'd', ARGV[i + 1])
  if type(sid) == 'table' then
    us = '*'
    sid = redis.call('XADD', KEYS[3], us, 'l', id, 's', seq, 'd', ARGV[i + 1])
  end
  local f = seq .. ':' .. id
  if redis.call('HSETNX', KEYS[4], f, sid) == 0 then
    -- The contract forbids reusing (lobby, seq), but if a caller does,
    -- keep both entries so that one Ack removes them all.
    redis.call('HSET', KEYS[4], f, redis.call('HGET', KEYS[4], f) .. ' ' .. sid)
  end
end
if #ARGV > 7 then redis.call('PUBLISH', ARGV[6], 'w') end
return 1
`

// deleteScript commits a Delete, leaving a tombstone that holds the floor
// and the deleted record's data.
//
//	KEYS: record, due
//	ARGV: expected, floor, lobby ID, notify channel
//
// It returns 1 after deleting, -1 if there is no record, or the stored
// version (a string) on a version mismatch.
const deleteScript = `
local cur = redis.call('HMGET', KEYS[1], 'v', 'd', 't')
if not cur[2] then return -1 end
local v = cur[1] or '0'
if v ~= ARGV[1] then return v end
if cur[3] then redis.call('ZREM', KEYS[2], cur[3] .. ARGV[3]) end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'f', cur[2])
return 1
`

// ackScript removes acknowledged events from one shard's outbox.
//
//	KEYS: out, ix
//	ARGV: the ix fields (seq:lobby) of the events
//
// It returns the number of outbox entries removed.
const ackScript = `
local n = 0
for i = 1, #ARGV do
  local sids = redis.call('HGET', KEYS[2], ARGV[i])
  if sids then
    for sid in string.gmatch(sids, '%S+') do
      n = n + redis.call('XDEL', KEYS[1], sid)
    end
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return n
`

// claimScript finds and claims due, unclaimed lobbies of one shard. A lobby
// is unclaimed at now if its record has no claim or the claim's until-key is
// at or before now.
//
//	KEYS: due
//	ARGV: mode, upper bound for ZRANGEBYLEX, now key, until key, limit,
//	      record key prefix, then (mode "ids") due members
//
// Modes: "scan" claims and returns up to limit due members in order; "peek"
// returns them without claiming; "ids" claims those of the given members
// that are still in the index and unclaimed, and returns them.
//
// Record keys are built from the prefix rather than passed in KEYS: the
// script cannot know them in advance, and they share the due key's hash tag,
// so in a Cluster they live in the same slot on the same node.
const claimScript = `
local function before(a, b)
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local mode, bound, now, untl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local limit, rp = tonumber(ARGV[5]), ARGV[6]
local function free(rk)
  local c = redis.call('HGET', rk, 'c')
  return (not c) or (not before(now, c))
end
local out = {}
if mode == 'ids' then
  for i = 7, #ARGV do
    local m = ARGV[i]
    local rk = rp .. string.sub(m, 25)
    if redis.call('ZSCORE', KEYS[1], m) and free(rk) then
      redis.call('HSET', rk, 'c', untl)
      out[#out + 1] = m
    end
  end
  return out
end
local start = '-'
local batch = limit
if batch < 64 then batch = 64 end
while #out < limit do
  local ms = redis.call('ZRANGEBYLEX', KEYS[1], start, bound, 'LIMIT', 0, batch)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local rk = rp .. string.sub(m, 25)
    if free(rk) then
      if mode == 'scan' then redis.call('HSET', rk, 'c', untl) end
      out[#out + 1] = m
      if #out >= limit then break end
    end
  end
  start = '(' .. ms[#ms]
end
return out
`

// script is a Lua script run by EVALSHA, falling back to EVAL (which also
// caches it on the server) when the server answers NOSCRIPT, as it does
// after a restart, a failover to a replica that never saw the script, or
// SCRIPT FLUSH.
type script struct {
	lua  *rueidis.Lua
	src  string
	sha1 string
}

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{lua: rueidis.NewLuaScript(src), src: src, sha1: hex.EncodeToString(sum[:])}
}

// exec runs the script once: one round trip while the server has it cached.
func (s *script) exec(ctx context.Context, c rueidis.Client, keys, args []string) rueidis.RedisResult {
	return s.lua.Exec(ctx, c, keys, args)
}

// execMulti runs the script once per entry of multi, pipelined, and returns
// the results in the same order. Entries the server no longer has the
// script for are run again with EVAL.
func (s *script) execMulti(ctx context.Context, c rueidis.Client, multi []rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(multi))
	for i, m := range multi {
		cmds[i] = c.B().Evalsha().Sha1(s.sha1).Numkeys(int64(len(m.Keys))).Key(m.Keys...).Arg(m.Args...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	for i := range res {
		if rerr, ok := rueidis.IsRedisErr(res[i].Error()); ok && rerr.IsNoScript() {
			res[i] = s.exec(ctx, c, multi[i].Keys, multi[i].Args)
		}
	}
	return res
}
