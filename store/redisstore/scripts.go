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

// luaLib holds the helpers several scripts share; it is prepended to them.
//
// ult compares two log positions or floors given as decimal strings without
// leading zeros: shorter is smaller, and equal lengths compare byte by byte.
// pad widens a position to the 20 digits of an age index member. atOf reads
// the 'a' field (the entry's time key) of a stream entry's field list,
// ageOf its 'g' field (its age key; entries of earlier versions have none
// and are as old as their time). posOf
// is the position of a stream entry ID "<position>-0". cursorOf splits a
// consumer's cursor field, "<cursor>" or "<cursor> <queue key>", into its
// parts. dropCursors removes the cursors of a lobby whose keys are gone, for
// the consumers that have nothing queued for it. queueKey is the key a
// consumer's queue gives a lobby whose work is not claimed: '0' and the
// server's clock in microseconds, 24 digits, so that unclaimed lobbies come
// oldest work first, and before '1', the claimed ones.
const luaLib = `
local function ult(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end
local function pad(p) return string.rep('0', 20 - #p) .. p end
local function atOf(f)
  for i = 1, #f, 2 do
    if f[i] == 'a' then return f[i + 1] end
  end
  return ''
end
local function ageOf(f)
  for i = 1, #f, 2 do
    if f[i] == 'g' then return f[i + 1] end
  end
  return atOf(f)
end
local function posOf(sid) return string.sub(sid, 1, -3) end
local function cursorOf(s)
  local i = string.find(s, ' ', 1, true)
  if i then return string.sub(s, 1, i - 1), string.sub(s, i + 1) end
  return s, nil
end
local function dropCursors(names, tag, id)
  for _, name in ipairs(names) do
    local ck = tag .. 'c:' .. name
    local s = redis.call('HGET', ck, id)
    if s and not string.find(s, ' ', 1, true) then redis.call('HDEL', ck, id) end
  end
end
local function listOf(s)
  local out, i = {}, 1
  while i <= #s do
    local j = string.find(s, ':', i, true)
    local n = tonumber(string.sub(s, i, j - 1))
    out[#out + 1] = string.sub(s, j + 1, j + n)
    i = j + 1 + n
  end
  return out
end
local function unindex(tag, id, sess)
  if redis.call('ZREM', tag .. 'sl:' .. sess, id) == 1 then
    if redis.call('HINCRBY', tag .. 'sh', sess, -1) <= 0 then redis.call('HDEL', tag .. 'sh', sess) end
  end
end
local function index(tag, id, sess)
  if redis.call('ZADD', tag .. 'sl:' .. sess, 0, id) == 1 then
    redis.call('HINCRBY', tag .. 'sh', sess, 1)
  end
end
local function queueKey()
  local t = redis.call('TIME')
  return '0' .. string.format('%018d%06d', tonumber(t[1]), tonumber(t[2]))
end
`

// loadScript reads a record, or the floor of an ID without one, in one
// atomic step.
//
//	KEYS: record, shard floor, shard floor time
//
// It returns {version, data, deadline key, tombstone data, At key}; for an
// ID with no hash at all the version is the shard floor, the At key the
// shard's floor time and the rest nil.
const loadScript = `
local r = redis.call('HMGET', KEYS[1], 'v', 'd', 't', 'f', 'a')
if not r[1] then
  r[1] = redis.call('GET', KEYS[2]) or '0'
  r[5] = redis.call('GET', KEYS[3])
end
return r
`

// writeScript commits a Write: the record, its deadline and, if the write
// carries one, its log entry, with count retention, the consumers' queues
// and the notification.
//
//	KEYS: record, due, log, age, shard floor, consumer names, keep index
//	ARGV: 1 expected, 2 new version, 3 data, 4 deadline key or "",
//	      5 lobby ID, 6 notify channel, 7 "1" if there is an entry (else
//	      ""), 8 entry, 9 entry time key, 10 entries kept per lobby
//	      (0: no bound), 11 shard tag "{P:k}:", 12 Write.Sessions in the
//	      list encoding (see listOf; "" for none)
//
// The record keeps the list in its field s, and the script moves the
// lobby between the sessions' index sets of its shard (sl:S, with the
// shard's count of lobbies per session in sh) in the same step.
//
// A write over a tombstone drops the tombstone's fields (data, At, Keep)
// and its member of the keep index.
//
// For each registered consumer, a lobby without a cursor gets one just
// before the new entry, and a lobby whose cursor is not queued is queued if
// the new entry lies after the cursor (a consumer may have committed past
// the head).
//
// It returns 1 after writing, or the stored version (a string, the floor
// for an ID without a record) on a version mismatch, having written
// nothing.
//
// The XADD comes right after the version check: with an explicit ID it is
// the one command that fails on data this package did not write (a log
// whose last ID is not below the position), and Redis does not undo a
// script's earlier writes when a later command fails.
const writeScript = luaLib + `
local cur = redis.call('HMGET', KEYS[1], 'v', 't', 'c', 'f', 'k', 'g', 's')
local v, fresh = cur[1], false
if not v then
  v = redis.call('GET', KEYS[5]) or '0'
  fresh = true
end
if v ~= ARGV[1] then return v end
local id, pos, entry = ARGV[5], ARGV[2], ARGV[7] == '1'
local ak = ARGV[9]
if entry and cur[6] and ult(ak, cur[6]) then ak = cur[6] end
if entry then redis.call('XADD', KEYS[3], pos .. '-0', 'a', ARGV[9], 'g', ak, 'd', ARGV[8]) end
if cur[4] then redis.call('HDEL', KEYS[1], 'f', 'a', 'k') end
if cur[5] then redis.call('ZREM', KEYS[7], cur[5] .. id) end
local old, new = cur[2], ARGV[4]
if old ~= new then
  if old then redis.call('ZREM', KEYS[2], old .. id) end
  if new ~= '' then redis.call('ZADD', KEYS[2], 0, new .. id) end
end
if new ~= '' then
  redis.call('HSET', KEYS[1], 'v', pos, 'd', ARGV[3], 't', new)
else
  redis.call('HSET', KEYS[1], 'v', pos, 'd', ARGV[3])
  if old then redis.call('HDEL', KEYS[1], 't') end
end
if cur[3] then redis.call('HDEL', KEYS[1], 'c') end
-- The session index, in the lobby's own slot: drop the lobby from the
-- sessions the previous write listed and this one does not, add it to
-- this one's.
local ss = ARGV[12] or ''
if (cur[7] or '') ~= ss then
  local keep = {}
  for _, x in ipairs(listOf(ss)) do
    keep[x] = true
    index(ARGV[11], id, x)
  end
  for _, x in ipairs(listOf(cur[7] or '')) do
    if not keep[x] then unindex(ARGV[11], id, x) end
  end
  if ss ~= '' then redis.call('HSET', KEYS[1], 's', ss) else redis.call('HDEL', KEYS[1], 's') end
end
-- An ID created at the shard floor may have had entries up to it under a
-- tombstone that is gone: a reader from before must learn it missed them.
if fresh and v ~= '0' then redis.call('HSET', KEYS[1], 'x', v) end
if not entry then return 1 end
redis.call('HSET', KEYS[1], 'g', ak)
redis.call('ZADD', KEYS[4], 0, ak .. pad(pos) .. id)
local keep = tonumber(ARGV[10])
if keep > 0 then
  local n = redis.call('XLEN', KEYS[3])
  if n > keep then
    local last
    for _, e in ipairs(redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', n - keep)) do
      last = posOf(e[1])
      redis.call('ZREM', KEYS[4], ageOf(e[2]) .. pad(last) .. id)
      redis.call('XDEL', KEYS[3], e[1])
    end
    redis.call('HSET', KEYS[1], 'x', last)
  end
end
local qk
for _, name in ipairs(redis.call('SMEMBERS', KEYS[6])) do
  local ck = ARGV[11] .. 'c:' .. name
  local s = redis.call('HGET', ck, id)
  local c, q = ARGV[1], nil
  if s then c, q = cursorOf(s) end
  if not q and ult(c, pos) then
    qk = qk or queueKey()
    redis.call('HSET', ck, id, c .. ' ' .. qk)
    redis.call('ZADD', ARGV[11] .. 'q:' .. name, 0, qk .. id)
  end
end
redis.call('PUBLISH', ARGV[6], pos .. ':' .. id)
return 1
`

// deleteScript commits a Delete. While the lobby has log entries, or the
// Deletion has a Keep, it leaves a tombstone with the floor, the deleted
// record's data, the trim marker, the At key and the Keep key (and puts the
// lobby in the keep index); otherwise it removes the lobby's keys and
// raises the shard floor and floor time to the lobby's instead.
//
//	KEYS: record, due, log, shard floor, consumer names, shard floor time,
//	      keep index
//	ARGV: expected, floor, lobby ID, shard tag, At key, Keep key or ""
//
// It removes the lobby from the session index sets its record lists. On
// a fold it also drops the lobby's cursors that have nothing queued.
// It returns 1 after deleting and leaving a tombstone, 2 after deleting
// and folding the floor into the shard floor, -1 if there is no record, or
// the stored version (a string) on a version mismatch.
const deleteScript = luaLib + `
local cur = redis.call('HMGET', KEYS[1], 'v', 'd', 't', 'x', 'g', 's')
if not cur[2] then return -1 end
local v = cur[1] or '0'
if v ~= ARGV[1] then return v end
if cur[3] then redis.call('ZREM', KEYS[2], cur[3] .. ARGV[3]) end
for _, x in ipairs(listOf(cur[6] or '')) do unindex(ARGV[4], ARGV[3], x) end
redis.call('DEL', KEYS[1])
local keep = ARGV[6]
if redis.call('XLEN', KEYS[3]) > 0 or keep ~= '' then
  redis.call('HSET', KEYS[1], 'v', ARGV[2], 'f', cur[2], 'a', ARGV[5])
  if cur[4] then redis.call('HSET', KEYS[1], 'x', cur[4]) end
  if cur[5] then redis.call('HSET', KEYS[1], 'g', cur[5]) end
  if keep ~= '' then
    redis.call('HSET', KEYS[1], 'k', keep)
    redis.call('ZADD', KEYS[7], 0, keep .. ARGV[3])
  end
  return 1
end
redis.call('DEL', KEYS[3])
local f = redis.call('GET', KEYS[4]) or '0'
if ult(f, ARGV[2]) then redis.call('SET', KEYS[4], ARGV[2]) end
local g = redis.call('GET', KEYS[6])
if not g or ult(g, ARGV[5]) then redis.call('SET', KEYS[6], ARGV[5]) end
dropCursors(redis.call('SMEMBERS', KEYS[5]), ARGV[4], ARGV[3])
return 2
`

// raiseFloorScript raises a shard floor to at least the given floor, and
// the shard's floor time to at least the given At key.
//
//	KEYS: shard floor, shard floor time
//	ARGV: floor, At key or "" (none)
const raiseFloorScript = luaLib + `
local f = redis.call('GET', KEYS[1]) or '0'
if ult(f, ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end
if ARGV[2] ~= '' then
  local g = redis.call('GET', KEYS[2])
  if not g or ult(g, ARGV[2]) then redis.call('SET', KEYS[2], ARGV[2]) end
end
return 1
`

// readLogScript reads a lobby's log after a position, or reports that
// retention trimmed what the reader asked for.
//
//	KEYS: record, log, shard floor
//	ARGV: after, after+1 (the first position wanted), limit
//
// It returns {'c', trimmed} for a compacted read, else {'e', entries} with
// the entries as XRANGE gives them.
const readLogScript = luaLib + `
local h = redis.call('HMGET', KEYS[1], 'v', 'x')
if not h[1] then
  local f = redis.call('GET', KEYS[3]) or '0'
  if ult(ARGV[1], f) then return {'c', f} end
elseif h[2] and ult(ARGV[1], h[2]) then
  return {'c', h[2]}
end
return {'e', redis.call('XRANGE', KEYS[2], ARGV[2], '+', 'COUNT', ARGV[3])}
`

// headScript returns the position of the newest entry of a log, or 0, so
// that LogHeads does not carry the entries themselves back.
//
//	KEYS: log
const headScript = `
local e = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #e == 0 then return '0' end
return string.sub(e[1][1], 1, -3)
`

// trimScript removes log entries of one shard older than a bound, oldest
// first by age key, and the shard's tombstones whose Keep has come. An
// entry goes together with every earlier entry of its lobby, so that a log
// is always a run of consecutive kept entries above its trim marker; those
// count against the limit too, and are old as well, since age keys never
// decrease along a log (the write script makes each at least the previous
// one). A tombstone whose last entry goes is removed and
// its floor and At folded into the shard's, unless its Keep is after now.
// A tombstone in the keep index whose Keep has come is removed the same
// way if its log is empty (counted against the limit), and otherwise
// forgets its Keep, to go with its last entry (not counted: each Keep is
// forgotten once). A member of the keep index whose lobby was written or
// deleted again since is dropped.
//
//	KEYS: age, shard floor, consumer names, shard floor time, keep index
//	ARGV: 1 mode, 2 age bound (ZRANGEBYLEX max; "" for no Age bound),
//	      3 limit, 4 shard tag, 5 now key, 6 keep bound (ZRANGEBYLEX max
//	      admitting the Keep keys at or before now), then (modes "ids" and
//	      "keepids") members
//
// Mode "scan" walks the age index and then the keep index itself; mode
// "ids" trims up to the given age members (still in the index) in order;
// mode "keepids" handles the given keep members that are still in the
// index. It returns how many entries and tombstones it removed, the highest
// floor it folded ('0' for none) and the latest At key it folded (empty for
// none).
const trimScript = luaLib + `
local limit, tag, now = tonumber(ARGV[3]), ARGV[4], ARGV[5]
local n, folded, foldedAt = 0, '0', ''

local function fold(id, rk, lk, v, a, k)
  redis.call('DEL', rk, lk)
  local f = redis.call('GET', KEYS[2]) or '0'
  if ult(f, v) then redis.call('SET', KEYS[2], v) end
  if ult(folded, v) then folded = v end
  if a then
    local g = redis.call('GET', KEYS[4])
    if not g or ult(g, a) then redis.call('SET', KEYS[4], a) end
    if foldedAt == '' or ult(foldedAt, a) then foldedAt = a end
  end
  if k then redis.call('ZREM', KEYS[5], k .. id) end
  dropCursors(redis.call('SMEMBERS', KEYS[3]), tag, id)
end

local function trim(m)
  local pos = string.gsub(string.sub(m, 25, 44), '^0+', '')
  local id = string.sub(m, 45)
  local rk, lk = tag .. 'r:' .. id, tag .. 'l:' .. id
  local es = redis.call('XRANGE', lk, '-', pos, 'COUNT', limit - n)
  if #es == 0 then
    redis.call('ZREM', KEYS[1], m)
    return
  end
  local last
  for _, e in ipairs(es) do
    last = posOf(e[1])
    redis.call('ZREM', KEYS[1], ageOf(e[2]) .. pad(last) .. id)
    redis.call('XDEL', lk, e[1])
    n = n + 1
  end
  local h = redis.call('HMGET', rk, 'v', 'd', 'x', 'k', 'a')
  if not h[1] then return end
  if not h[2] and redis.call('XLEN', lk) == 0 and (not h[4] or not ult(now, h[4])) then
    fold(id, rk, lk, h[1], h[5], h[4])
  elseif not h[3] or ult(h[3], last) then
    redis.call('HSET', rk, 'x', last)
  end
end

local function kept(m)
  redis.call('ZREM', KEYS[5], m)
  local k, id = string.sub(m, 1, 24), string.sub(m, 25)
  local rk, lk = tag .. 'r:' .. id, tag .. 'l:' .. id
  local h = redis.call('HMGET', rk, 'v', 'd', 'k', 'a')
  if not h[1] or h[2] or h[3] ~= k then return end
  if redis.call('XLEN', lk) > 0 then
    redis.call('HDEL', rk, 'k')
    return
  end
  fold(id, rk, lk, h[1], h[4], nil)
  n = n + 1
end

if ARGV[1] == 'ids' then
  for i = 7, #ARGV do
    if n >= limit then break end
    if redis.call('ZSCORE', KEYS[1], ARGV[i]) then trim(ARGV[i]) end
  end
  return {n, folded, foldedAt}
end
if ARGV[1] == 'keepids' then
  for i = 7, #ARGV do
    if n >= limit then break end
    if redis.call('ZSCORE', KEYS[5], ARGV[i]) then kept(ARGV[i]) end
  end
  return {n, folded, foldedAt}
end
if ARGV[2] ~= '' then
  while n < limit do
    local ms = redis.call('ZRANGEBYLEX', KEYS[1], '-', ARGV[2], 'LIMIT', 0, 1)
    if #ms == 0 then break end
    trim(ms[1])
  end
end
while n < limit do
  local ms = redis.call('ZRANGEBYLEX', KEYS[5], '-', ARGV[6], 'LIMIT', 0, 1)
  if #ms == 0 then break end
  kept(ms[1])
end
return {n, folded, foldedAt}
`

// claimLogScript claims lobbies with uncommitted entries for a consumer. A
// queue member is a 25-byte queue key and the lobby ID: '0' and a time for
// unclaimed work, '1' and a claimed-until key for claimed work; a claim
// moves the member to '1' and the new until key.
//
//	KEYS: pairs of the consumer's cursors and queue, one pair per shard
//	      (mode "ids": one pair)
//	ARGV: 1 mode, 2 ZRANGEBYLEX max that admits the claims over at now,
//	      3 '1' .. until key, 4 limit, then (mode "ids") queue members
//
// Mode "scan" merges the claimable members of every pair it is given:
// claims that ran out first (their work waited longest), earliest end
// first, then unclaimed lobbies, oldest work first, and claims the first
// limit, all in this one script. Every pair must then be on one server:
// several pairs only when the store is not on a Cluster. Mode "ids" claims
// those of the given members that are still in the queue unchanged. A
// member whose lobby has no queued cursor (which this package never
// leaves) is dropped. It returns lobby ID and cursor pairs, flattened.
const claimLogScript = luaLib + `
local out, limit, untl = {}, tonumber(ARGV[4]), ARGV[3]
local function claim(ck, qk, m)
  local id = string.sub(m, 26)
  local s = redis.call('HGET', ck, id)
  redis.call('ZREM', qk, m)
  if not s then return end
  local c, q = cursorOf(s)
  if not q then return end
  redis.call('ZADD', qk, 0, untl .. id)
  redis.call('HSET', ck, id, c .. ' ' .. untl)
  out[#out + 1] = id
  out[#out + 1] = c
end
if ARGV[1] == 'ids' then
  for i = 5, #ARGV do
    if redis.call('ZSCORE', KEYS[2], ARGV[i]) then claim(KEYS[1], KEYS[2], ARGV[i]) end
  end
  return out
end
local function before(a, b)
  local x, y = string.byte(a, 1), string.byte(b, 1)
  if x ~= y then return x > y end
  for i = 2, math.min(#a, #b) do
    x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local lists, at = {}, {}
for i = 1, #KEYS, 2 do
  local ms = redis.call('ZRANGEBYLEX', KEYS[i + 1], '[1', ARGV[2], 'LIMIT', 0, limit)
  for _, m in ipairs(redis.call('ZRANGEBYLEX', KEYS[i + 1], '-', '(1', 'LIMIT', 0, limit)) do
    ms[#ms + 1] = m
  end
  lists[#lists + 1] = ms
  at[#at + 1] = 1
end
while #out < 2 * limit do
  local best
  for j = 1, #lists do
    local m = lists[j][at[j]]
    if m and (not best or before(m, lists[best][at[best]])) then best = j end
  end
  if not best then break end
  local m = lists[best][at[best]]
  at[best] = at[best] + 1
  claim(KEYS[2 * best - 1], KEYS[2 * best], m)
end
return out
`

// commitLogScript moves a consumer's cursor for a lobby and releases its
// claim: the lobby goes back to the queue, unclaimed and behind the work
// already waiting, if its log has entries after the cursor, and otherwise
// leaves the queue (the cursor stays; the write script queues the lobby
// again when an entry after it arrives). A lobby with no cursor is left
// alone: a commit can only name a position of a cursor this name was given,
// and after a server that keeps nothing restarted, a commit of a position
// from before the restart must not skip the new entries.
//
//	KEYS: consumer names, the consumer's cursors, its queue, log
//	ARGV: name, lobby ID, after
//
// It returns 1, or -1 if the name is not registered.
const commitLogScript = luaLib + `
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then return -1 end
local id = ARGV[2]
local s = redis.call('HGET', KEYS[2], id)
if not s then return 1 end
local c, q = cursorOf(s)
if ult(c, ARGV[3]) then c = ARGV[3] end
if q then redis.call('ZREM', KEYS[3], q .. id) end
local last = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)
if #last == 0 or not ult(c, posOf(last[1][1])) then
  redis.call('HSET', KEYS[2], id, c)
  return 1
end
local qk = queueKey()
redis.call('ZADD', KEYS[3], 0, qk .. id)
redis.call('HSET', KEYS[2], id, c .. ' ' .. qk)
return 1
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
	lua      *rueidis.Lua
	src      string
	sha1     string
	readonly bool // run with EVALSHA_RO: the script only reads
}

// The session scripts run in the home shard (shard 0), which holds every
// session record ({P:0}:s:S, a hash: d the deadline key, e "1" once
// EndSession ended it) and the deadline index {P:0}:sdue (score 0,
// members deadline key + S). Session keys are built in the script from
// the tag; they share the home shard's slot.

// openSessionScript: KEYS: deadline index; ARGV: home tag, S, deadline
// key. Returns 1, or 0 if S is known.
const openSessionScript = `
local k = ARGV[1] .. 's:' .. ARGV[2]
if redis.call('EXISTS', k) == 1 then return 0 end
redis.call('HSET', k, 'd', ARGV[3])
redis.call('ZADD', KEYS[1], 0, ARGV[3] .. ARGV[2])
return 1
`

// renewSessionScript: KEYS: deadline index; ARGV: home tag, S, now key,
// deadline key. Returns 1 after renewing (the deadline becomes the later
// of the two), 0 if the session is unknown, ended or due at now. The
// deadline keys have one width, so ult compares them as instants.
const renewSessionScript = luaLib + `
local k = ARGV[1] .. 's:' .. ARGV[2]
local cur = redis.call('HMGET', k, 'd', 'e')
if not cur[1] or cur[2] or not ult(ARGV[3], cur[1]) then return 0 end
if ult(cur[1], ARGV[4]) then
  redis.call('ZREM', KEYS[1], cur[1] .. ARGV[2])
  redis.call('ZADD', KEYS[1], 0, ARGV[4] .. ARGV[2])
  redis.call('HSET', k, 'd', ARGV[4])
end
return 1
`

// endSessionScript: KEYS: deadline index; ARGV: home tag, S, at key.
const endSessionScript = luaLib + `
local k = ARGV[1] .. 's:' .. ARGV[2]
local d = redis.call('HGET', k, 'd')
if not d then return 0 end
redis.call('HSET', k, 'e', '1')
if ult(ARGV[3], d) then
  redis.call('ZREM', KEYS[1], d .. ARGV[2])
  redis.call('ZADD', KEYS[1], 0, ARGV[3] .. ARGV[2])
  redis.call('HSET', k, 'd', ARGV[3])
end
return 1
`

// sessionDeadlinesScript: ARGV: home tag, then the IDs. Returns each
// deadline key, or false for an unknown ID.
const sessionDeadlinesScript = `
local out = {}
for i = 2, #ARGV do out[i - 1] = redis.call('HGET', ARGV[1] .. 's:' .. ARGV[i], 'd') end
return out
`

// dueSessionsScript: KEYS: deadline index; ARGV: exclusive upper bound
// ("(" + key, or "+"), offset, count. The members of due sessions in
// (deadline, ID) order.
const dueSessionsScript = `
return redis.call('ZRANGE', KEYS[1], '-', ARGV[1], 'BYLEX', 'LIMIT', ARGV[2], ARGV[3])
`

// heldScript: KEYS: a shard's session counts; ARGV: session IDs. Returns
// for each whether it holds a lobby of the shard.
const heldScript = `
local out = {}
for i = 1, #ARGV do out[i] = redis.call('HEXISTS', KEYS[1], ARGV[i]) end
return out
`

// forgetSessionsScript: KEYS: deadline index, the home shard's session
// counts; ARGV: home tag, then deadline-index members. Forgets each
// session whose member is still current (no renewal or end moved it since
// it was found due) and that holds no lobby of the home shard, and
// returns how many it forgot.
const forgetSessionsScript = `
local n = 0
for i = 2, #ARGV do
  local m = ARGV[i]
  local id = string.sub(m, 25)
  local k = ARGV[1] .. 's:' .. id
  local d = redis.call('HGET', k, 'd')
  if d and d .. id == m and redis.call('HEXISTS', KEYS[2], id) == 0 then
    redis.call('DEL', k)
    redis.call('ZREM', KEYS[1], m)
    n = n + 1
  end
end
return n
`

// sessionLobbiesScript: KEYS: a shard's index set of one session; ARGV:
// lower bound ("-" or "(" + ID), count.
const sessionLobbiesScript = `
return redis.call('ZRANGE', KEYS[1], ARGV[1], '+', 'BYLEX', 'LIMIT', 0, ARGV[2])
`

func newScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{lua: rueidis.NewLuaScript(src), src: src, sha1: hex.EncodeToString(sum[:])}
}

func newReadScript(src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{lua: rueidis.NewLuaScriptReadOnly(src), src: src, sha1: hex.EncodeToString(sum[:]), readonly: true}
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
		if s.readonly {
			cmds[i] = c.B().EvalshaRo().Sha1(s.sha1).Numkeys(int64(len(m.Keys))).Key(m.Keys...).Arg(m.Args...).Build()
		} else {
			cmds[i] = c.B().Evalsha().Sha1(s.sha1).Numkeys(int64(len(m.Keys))).Key(m.Keys...).Arg(m.Args...).Build()
		}
	}
	res := c.DoMulti(ctx, cmds...)
	for i := range res {
		if rerr, ok := rueidis.IsRedisErr(res[i].Error()); ok && rerr.IsNoScript() {
			res[i] = s.exec(ctx, c, multi[i].Keys, multi[i].Args)
		}
	}
	return res
}
