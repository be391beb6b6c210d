package redisstore

import (
	"crypto/sha1"
	"encoding/hex"
)

// decideScript is the one Lua script of the package: every algorithm, and
// requests of one or several rules. One call decides a batch of requests
// from many callers, one after another, exactly as separate calls would
// (the same key twice sees its own update):
//
//	KEYS[i]          the i-th item's key (all in one Cluster slot, or any
//	                 keys on a standalone server)
//	ARGV[1]          now in µs, or "" to read Redis TIME once for the call
//	                 (the production form; the other is for tests)
//	ARGV[2]          the TTL margin in milliseconds
//	ARGV[3]          K, the parameter sets that follow
//	ARGV[4..3+6K]    K sets: algorithm, D (ticks per µs), x1..x4 (see newParams)
//	then per item    16·(8·cost + flags) + the index of its parameter set
//	                 (from 0): flag bit 0 marks a shadow item (its refusal
//	                 refuses nothing), bit 1 that more items of the same
//	                 request follow, bit 2 a key that came earlier in the
//	                 call (read again, not from the call's first read)
//
// A request of several items (rules) is checked whole before anything is
// written: its units are spent only if none of its enforced items is
// refused (an item refused, or one its rule allows while another refuses,
// then writes what a query would: refills, trims, window rolls). It
// returns Redis's now in µs, then per item: allowed + 2·remaining,
// reset and retryAfter in ticks (retryAfter −1: never), and for the leaky
// queue the admitted units' delay in ticks (−1 for a query or a refusal).
//
// All arithmetic is on integers below 2^53 (see params.go), so the
// decisions are those of exact arithmetic on the µs grid, and the formulas
// are the in-memory algorithms' (package ratelimit). Under a scale below 1
// a token bucket or a leaky meter refills or drains at the ratio x3 of the
// rule's rate in the rule's ticks, rounded down to whole ticks at each
// decision (the durations it reports rounded up).
//
// State per key (instants in µs; an instant of the GCRA or the leaky
// queue may carry a remainder r of ticks, 0 ≤ r < D, written "q:r"):
//
//	GCRA                 string: TAT                              (SET … PX)
//	token bucket         hash {t: tokens × N (ticks), l: last refill}
//	leaky meter          hash {v: level × N (ticks), l: last leak}
//	leaky queue          sorted set: each waiting unit scored by its release
//	                     instant rounded up to the µs, named "q:r/i" after its
//	                     request's start; member "f" + r scored by the next free
//	                     instant rounded up (always last: 'f' sorts after digits)
//	fixed window         hash {c: count, w: window number}
//	sliding window cnt.  hash {p: previous count, c: current count, w: window number}
//	sliding log          sorted set of admitted instants, named "µs/i" (unique)
const decideScript = `
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local margin = tonumber(ARGV[2])
local np = tonumber(ARGV[3])
local floor, ceil, fmt, find, sub = math.floor, math.ceil, string.format, string.find, string.sub
local NEVER, STEPBACK = -1, 65536
local PA, PD, X1, X2, X3, X4 = {}, {}, {}, {}, {}, {}
local onlyGCRA = true
local NEED = {} -- the algorithms of this call: only their functions are made
for i = 1, np do
  local b = 3 + (i - 1) * 6
  PA[i], PD[i] = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2])
  X1[i], X2[i], X3[i], X4[i] = tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
  if PA[i] ~= 7 then onlyGCRA = false end
  NEED[PA[i]] = true
end
-- A call of GCRA items reads all its keys at once (GV); a key that comes
-- again (flag bit 2) is read again.
local GV, again
if onlyGCRA and #KEYS > 1 then
  GV = redis.call('MGET', unpack(KEYS))
end

-- ttl is the PX of a state that is empty in us µs.
local function ttl(us)
  local ms = ceil(us / 1000)
  if not (ms > 0) then ms = 0 end
  ms = ms + margin
  if ms > 1e14 then ms = 1e14 end
  return ms
end

-- read runs a command that reads key; a key of another type (a rule whose
-- algorithm changed under the same id) is dropped and reads as missing,
-- rather than failing every decision of the call.
local function read(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    redis.call('DEL', (select(2, ...)))
    return false
  end
  return r
end

-- An instant now + a ticks as q µs and r ticks.
local function instant(a, d)
  local q = floor(a / d)
  return now + q, a - q * d
end

-- Each algorithm has a check, which reads the key (writing only what does
-- not change a decision: trims) and returns allowed, remaining, reset,
-- retry, delay and up to four values for its commit, which writes: with
-- spend, the request's units; without, what a query writes.

-- GCRA: TAT, written only when units are spent. (The hot path: helpers
-- inlined.)
local function gcraCheck(k, p, cost)
  local d, n, burst = PD[p], X1[p], X2[p]
  local key = KEYS[k]
  local v
  if GV and not again then v = GV[k] else v = read('GET', key) end
  local a = 0
  if v then
    local q, r = tonumber(v), 0
    if not q then
      local i = find(v, ':', 1, true)
      if i then q, r = tonumber(sub(v, 1, i - 1)), tonumber(sub(v, i + 1)) end
    end
    if q and r then
      a = (q - now) * d + r
      if a < 0 then a = 0 end
    end
  end
  local cap = burst * n
  local after = a + cost * n
  local allowed = cost <= 0 or after <= cap
  local retry, x = 0, after
  if not allowed then
    retry = NEVER
    if cost <= burst then retry = after - cap end
  end
  if not allowed or cost <= 0 then x = a end
  local rem = floor((cap - x) / n)
  if rem < 0 then rem = 0 elseif rem > burst then rem = burst end
  return allowed, rem, x, retry, 0, after
end
local function gcraCommit(k, p, cost, spend, after)
  if spend and cost > 0 then
    local d = PD[p]
    local q = floor(after / d)
    local r = after - q * d
    q = now + q
    local v = q
    if r ~= 0 then v = fmt('%d:%d', q, r) end
    local ms = ceil(after / d / 1000) + margin
    if ms > 1e14 then ms = 1e14 end
    redis.call('SET', KEYS[k], v, 'PX', ms)
  end
end

local tbCheck, tbCommit, meterCheck, meterCommit, queueCheck, queueCommit, windowCheck, windowCommit, counterCheck, counterCommit, roll, fits, counterRemaining, firstFit, logCheck, logCommit

-- Token bucket and leaky meter: one bucket of tokens, in ticks of the
-- rule's interval, refilled at ratio. The token bucket stores its tokens
-- (a missing key is full), the meter its level, cap − tokens (a missing
-- key is empty): under a scale, the token bucket's tokens carry over (cut
-- to the scaled burst), the meter's level does.
local function bucket(meter)
  local check = function(k, p, cost)
    local key = KEYS[k]
    local d, n, burst, ratio = PD[p], X1[p], X2[p], X3[p]
    local s
    if meter then s = read('HMGET', key, 'v', 'l') or {} else s = read('HMGET', key, 't', 'l') or {} end
    local tokens, last = tonumber(s[1]), tonumber(s[2])
    local cap = burst * n
    if tokens == nil or last == nil then
      tokens, last = cap, now
    else
      if meter then tokens = cap - tokens end
      local e = now - last
      if e < 0 then e = 0 else last = now end
      if ratio == 1 then tokens = tokens + e * d else tokens = tokens + floor(e * d * ratio) end
      if tokens > cap then tokens = cap end
    end
    local need = cost * n
    local allowed = cost <= 0 or need <= tokens
    local left = tokens
    if allowed and cost > 0 then left = tokens - need end
    local retry = 0
    if not allowed then
      retry = NEVER
      if cost <= burst then retry = (last - now) * d + ceil((need - tokens) / ratio) end
    end
    local rem = floor(left / n)
    if rem < 0 then rem = 0 end
    return allowed, rem, ceil((cap - left) / ratio), retry, 0, tokens, last
  end
  local commit = function(k, p, cost, spend, tokens, last)
    local key = KEYS[k]
    local d, n, burst, ratio, own = PD[p], X1[p], X2[p], X3[p], X4[p]
    if spend and cost > 0 then tokens = tokens - cost * n end
    local keep = (burst * n - tokens) / ratio
    if meter then
      redis.call('HSET', key, 'v', burst * n - tokens, 'l', last)
    else
      if ratio ~= 1 and own * n - tokens > keep then keep = own * n - tokens end
      redis.call('HSET', key, 't', tokens, 'l', last)
    end
    redis.call('PEXPIRE', key, ttl(keep / d))
  end
  return check, commit
end
if NEED[1] then tbCheck, tbCommit = bucket(false) end
if NEED[2] then meterCheck, meterCommit = bucket(true) end

-- Leaky queue: units waiting for their release instants.
if NEED[3] then
  queueCheck = function(k, p, cost)
    local key = KEYS[k]
    local d, n, size = PD[p], X1[p], X2[p]
    read('ZREMRANGEBYSCORE', key, '-inf', now)
    local top = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
    local waiting, back, free, fname = 0, now, 0, nil
    if #top >= 2 then
      fname = top[#top - 1]
      local r = tonumber(string.sub(fname, 2))
      local q = tonumber(top[#top])
      if r > 0 then q = q - 1 end
      free = (q - now) * d + r
      if #top == 4 then
        back = tonumber(top[2])
        waiting = redis.call('ZCARD', key) - 1
      end
    end
    local reset = 0
    if waiting > 0 then reset = (back - now) * d end
    local room = size - waiting
    if room < 0 then room = 0 end
    if cost <= 0 then return true, room, reset, 0, -1 end
    if waiting + cost > size then
      local retry = NEVER
      if cost <= size then
        local k = waiting + cost - size
        retry = (tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2]) - now) * d
      end
      return false, room, reset, retry, -1
    end
    if free < 0 then free = 0 end
    local last = free + (cost - 1) * n -- the last unit's release, ticks from now
    local stay = cost
    if free <= 0 then stay = cost - 1 end -- a unit released at once is not stored
    if stay > 0 then reset = ceil(last / d) * d end
    local room = size - waiting - stay
    if room < 0 then room = 0 end
    return true, room, reset, 0, free, free, fname
  end
  queueCommit = function(k, p, cost, spend, free, fname)
    local key = KEYS[k]
    if not (spend and cost > 0) then return end
    local d, n = PD[p], X1[p]
    local oq, orr = instant(free, d)
    local member = fmt('%d:%d/', oq, orr)
    local args, j, x = {}, 0, free
    for i = 1, cost do
      if x > 0 then
        args[j + 1] = now + ceil(x / d)
        args[j + 2] = member .. i
        j = j + 2
        if j >= 1000 then
          redis.call('ZADD', key, unpack(args, 1, j))
          j = 0
        end
      end
      x = x + n
    end
    local fq, fr = instant(x, d)
    local fscore = fq
    if fr > 0 then fscore = fq + 1 end
    local fnew = 'f' .. fr
    if fname and fname ~= fnew then redis.call('ZREM', key, fname) end
    args[j + 1] = fscore
    args[j + 2] = fnew
    redis.call('ZADD', key, unpack(args, 1, j + 2))
    redis.call('PEXPIRE', key, ttl(x / d))
  end
end

-- Fixed window: a count per window of w µs.
if NEED[4] then
  windowCheck = function(k, p, cost)
    local key = KEYS[k]
    local limit, w = X1[p], X2[p]
    local s = read('HMGET', key, 'c', 'w') or {}
    local count, win = tonumber(s[1]) or 0, tonumber(s[2])
    local wf = floor(now / w)
    if win == nil then win = wf end
    local back = wf - win
    local changed = false
    if back ~= 0 then
      if back < 0 and back >= -STEPBACK and count > 0 then
        wf = win
      else
        count, win, changed = 0, wf, true
      end
    end
    local allowed = cost <= 0 or count + cost <= limit
    local after = count
    if allowed and cost > 0 then after = count + cost end
    local finish = (wf + 1) * w
    local reset, retry = 0, 0
    if after > 0 then reset = finish - now end
    if not allowed then
      retry = NEVER
      if cost <= limit then retry = finish - now end
    end
    local rem = limit - after
    if rem < 0 then rem = 0 end
    return allowed, rem, reset, retry, 0, count, win, changed, finish
  end
  windowCommit = function(k, p, cost, spend, count, win, changed, finish)
    local key = KEYS[k]
    if spend and cost > 0 then count, changed = count + cost, true end
    if not changed then return end
    if count > 0 then
      redis.call('HSET', key, 'c', count, 'w', win)
      redis.call('PEXPIRE', key, ttl(finish - now))
    else
      redis.call('DEL', key)
    end
  end
end

-- Sliding window counter: the previous window's count weighs by the share
-- of it still inside the sliding window; a weight is num/w.
if NEED[6] then
  roll = function(t, w, prev, cur, win)
    local f = floor(t / w)
    local b = f - win
    if b ~= 0 then
      if b < 0 and b >= -STEPBACK and (prev > 0 or cur > 0) then return win, w, prev, cur, win end
      if b == 1 then prev = cur else prev = 0 end
      cur, win = 0, f
    end
    return f, (f + 1) * w - t, prev, cur, win
  end
  -- fits: prev·num/w + (cur + k − 1) < limit, in integers.
  fits = function(limit, w, prev, num, cur, k)
    return prev * num + (cur + k - 1) * w < limit * w
  end
  counterRemaining = function(limit, w, prev, num, cur)
    local k = floor(((limit - cur + 1) * w - prev * num - 1) / w)
    if k < 0 then return 0 end
    if k > limit then return limit end
    return k
  end
  -- firstFit is the first µs at which cost fits, from window wf (whose
  -- counts are prev and cur) on.
  firstFit = function(limit, w, prev, cur, wf, cost)
    local t0 = wf * w
    if now > t0 then t0 = now end
    local counts = {{prev, cur}, {cur, 0}}
    for i = 1, 2 do
      local p, c = counts[i][1], counts[i][2]
      -- fits at u µs into the window: p·(w − u) < room·w
      local room = limit - c - cost + 1
      local u = w
      if p == 0 then
        if room > 0 then u = 0 end
      elseif p < room then
        u = 0
      else
        u = floor(w * (p - room) / p) + 1
      end
      local t = (wf + i - 1) * w + u
      if t < t0 then t = t0 end
      if u < w and t < (wf + i) * w then return t - now end
    end
    return (wf + 2) * w - now
  end
  counterCheck = function(k, p, cost)
    local key = KEYS[k]
    local limit, w = X1[p], X2[p]
    local s = read('HMGET', key, 'p', 'c', 'w') or {}
    local prev, cur, win = tonumber(s[1]) or 0, tonumber(s[2]) or 0, tonumber(s[3])
    if win == nil then win = floor(now / w) end
    local p0, c0, w0 = prev, cur, win
    local wf, num
    wf, num, prev, cur, win = roll(now, w, prev, cur, win)
    local allowed = cost <= 0 or fits(limit, w, prev, num, cur, cost)
    local after = cur
    if allowed and cost > 0 then after = cur + cost end
    local reset, retry = 0, 0
    if after > 0 then
      reset = (wf + 2) * w - now
    elseif prev > 0 then
      reset = (wf + 1) * w - now
    end
    if not allowed then
      retry = NEVER
      if cost <= limit then retry = firstFit(limit, w, prev, cur, wf, cost) end
    end
    local changed = prev ~= p0 or cur ~= c0 or win ~= w0
    return allowed, counterRemaining(limit, w, prev, num, after), reset, retry, 0, prev, cur, win, changed
  end
  counterCommit = function(k, p, cost, spend, prev, cur, win, changed)
    local key = KEYS[k]
    if spend and cost > 0 then cur, changed = cur + cost, true end
    if not changed then return end
    if prev > 0 or cur > 0 then
      local w = X2[p]
      local wf = floor(now / w)
      if win > wf then wf = win end
      local reset = (wf + 1) * w - now
      if cur > 0 then reset = reset + w end
      redis.call('HSET', key, 'p', prev, 'c', cur, 'w', win)
      redis.call('PEXPIRE', key, ttl(reset))
    else
      redis.call('DEL', key)
    end
  end
end

-- Sliding log: one member per admitted unit.
if NEED[5] then
  logCheck = function(k, p, cost)
    local key = KEYS[k]
    local limit, w = X1[p], X2[p]
    local top = read('ZRANGE', key, -1, -1, 'WITHSCORES') or {}
    local at, newest = now, nil
    if top[2] then
      newest = tonumber(top[2])
      if at < newest then at = newest end
    end
    local cut = at - w
    local n = 0
    if newest ~= nil then
      if newest <= cut then
        redis.call('DEL', key)
        newest = nil
      else
        redis.call('ZREMRANGEBYSCORE', key, '-inf', cut)
        n = redis.call('ZCARD', key)
      end
    end
    local allowed = cost <= 0 or n + cost <= limit
    local after, last = n, newest
    if allowed and cost > 0 then after, last = n + cost, at end
    local reset, retry = 0, 0
    if after > 0 then reset = last + w - now end
    if not allowed then
      retry = NEVER
      if cost <= limit then
        local k = n + cost - limit
        retry = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2]) + w - now
      end
    end
    local room = limit - after
    if room < 0 then room = 0 end
    return allowed, room, reset, retry, 0, at, n, newest
  end
  logCommit = function(k, p, cost, spend, at, n, newest)
    local key = KEYS[k]
    if spend and cost > 0 then
      local member = fmt('%d/', at)
      local args, j = {}, 0
      for i = 1, cost do
        args[j + 1] = at
        args[j + 2] = member .. (n + i)
        j = j + 2
        if j >= 1000 or i == cost then
          redis.call('ZADD', key, unpack(args, 1, j))
          j = 0
        end
      end
      newest = at
    end
    if newest ~= nil then redis.call('PEXPIRE', key, ttl(newest + X2[p] - now)) end
  end
end

-- By ratelimit.Algorithm: 1 token bucket, 2 leaky meter, 3 leaky queue,
-- 4 fixed window, 5 sliding log, 6 sliding window counter, 7 GCRA.
local CHECK = {tbCheck, meterCheck, queueCheck, windowCheck, logCheck, counterCheck, gcraCheck}
local COMMIT = {tbCommit, meterCommit, queueCommit, windowCommit, logCommit, counterCommit, gcraCommit}

local out, o = {now}, 1
local first = 4 + np * 6
local nk = #KEYS
local k = 1
local OK, RM, RS, RT, DL, W1, W2, W3, W4, C, P -- a request of several items
while k <= nk do
  local v = tonumber(ARGV[first + k - 1])
  local p = v % 16
  v = (v - p) / 16
  p = p + 1
  local flags = v % 8
  local cost = (v - flags) / 8
  again = flags >= 4
  if flags % 4 < 2 then
    local alg = PA[p]
    local allowed, rem, reset, retry, delay, w1, w2, w3, w4
    if alg == 7 then
      allowed, rem, reset, retry, delay, w1 = gcraCheck(k, p, cost)
      gcraCommit(k, p, cost, allowed, w1)
    else
      allowed, rem, reset, retry, delay, w1, w2, w3, w4 = CHECK[alg](k, p, cost)
      COMMIT[alg](k, p, cost, allowed, w1, w2, w3, w4)
    end
    if allowed then out[o + 1] = 1 + 2 * rem else out[o + 1] = 2 * rem end
    out[o + 2], out[o + 3] = reset, retry
    o = o + 3
    if alg == 3 then
      out[o + 1] = delay
      o = o + 1
    end
    k = k + 1
  else
    if not OK then OK, RM, RS, RT, DL, W1, W2, W3, W4, C, P = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} end
    local j, refused, more = k, false, true
    while more do
      if j > k then
        v = tonumber(ARGV[first + j - 1])
        p = v % 16
        v = (v - p) / 16
        p = p + 1
        flags = v % 8
        cost = (v - flags) / 8
        again = flags >= 4
      end
      more = flags % 4 >= 2
      OK[j], RM[j], RS[j], RT[j], DL[j], W1[j], W2[j], W3[j], W4[j] = CHECK[PA[p]](j, p, cost)
      C[j], P[j] = cost, p
      if not OK[j] and flags % 2 == 0 then refused = true end
      j = j + 1
    end
    for i = k, j - 1 do
      local alg = PA[P[i]]
      COMMIT[alg](i, P[i], C[i], OK[i] and not refused, W1[i], W2[i], W3[i], W4[i])
      if OK[i] then out[o + 1] = 1 + 2 * RM[i] else out[o + 1] = 2 * RM[i] end
      out[o + 2], out[o + 3] = RS[i], RT[i]
      o = o + 3
      if alg == 3 then
        out[o + 1] = DL[i]
        o = o + 1
      end
    end
    k = j
  end
end
return out
`

// script is the Lua source and its SHA-1 (the EVALSHA digest).
type script struct {
	src string
	sha string
}

func newScript(src string) script {
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

// theScript decides every algorithm.
var theScript = newScript(decideScript)
