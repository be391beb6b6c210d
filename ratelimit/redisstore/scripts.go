package redisstore

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/spillwayhq/spillway/ratelimit"
)

// The Lua scripts, one per algorithm: a common prelude, the algorithm's
// body (which defines decide(key, cost)), and an epilogue that decides every
// key in turn. One call decides a batch:
//
//	KEYS[i]     the i-th decision's key (all in one Cluster slot, or any
//	            keys on a standalone server)
//	ARGV[1]     now in seconds, or "" to read Redis TIME once for the batch
//	            (the production form; the other is for tests)
//	ARGV[2]     the TTL margin in milliseconds
//	ARGV[3..4]  the algorithm's two parameters (see each body) for the
//	            batch's scale (see Store.SetScale; the rule's own at scale 1)
//	ARGV[5..6]  the rule's own parameters, at scale 1 (the token bucket's
//	            TTL covers both)
//	ARGV[6+i]   the i-th decision's cost (a whole number; ≤ 0 is a query)
//
// It returns ten integers per key: allowed (1/0), remaining, then
// retryAfter, reset, delay and start, each as two integers m, e with value
// m·2^(e−53) (math.frexp's mantissa scaled to a 53-bit integer: exact, and
// far cheaper than string.format, which costs Redis about a microsecond per
// number; e = 99999 stands for +Inf). Redis turns a Lua number reply into an
// integer, hence the split. Numbers stored in keys are passed to redis.call
// as Lua numbers, which Redis writes with 17 significant digits: they read
// back exactly.
//
// Deciding a batch in one call pays the command's parsing, the script's
// set-up and the clock read once per batch instead of once per decision:
// the decisions themselves cost a GET and a SET (or their hash and
// sorted-set equivalents) each. The keys are decided one after another, as
// separate EVALs would: the same key twice in a batch sees its own update.
//
// The arithmetic is the in-memory algorithms' (package ratelimit), operation
// for operation: Lua numbers are float64 and the Lua VM computes each
// operation on its own (no fused multiply-add), so on the same timeline the
// decisions, Remaining, Reset, Delay and Start are bit for bit those of the
// in-memory code. RetryAfter starts at the same algebraic answer and then
// gallops upward until a retry at now+RetryAfter would pass; the in-memory
// code searches float64 by float64, so the two may differ by a few ulps.
const prelude = `
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[1])
end
if not (now >= 0) then now = 0 end
local margin = tonumber(ARGV[2])
local P1, P2 = tonumber(ARGV[3]), tonumber(ARGV[4])
local R1, R2 = tonumber(ARGV[5]), tonumber(ARGV[6])
local INF = math.huge
local EPS = 1 / 4503599627370496
local STEPBACK = 65536
local floor, ceil, frexp = math.floor, math.ceil, math.frexp

local function ttl(sec)
  local ms = ceil(sec * 1000)
  if not (ms > 0) then ms = 0 end
  ms = ms + margin
  if ms > 1e14 then ms = 1e14 end
  return ms
end

local function settle(guess, ok)
  local ra = guess
  if not (ra > 0) then ra = 0 end
  if ok(now + ra) then return ra end
  local step = (now + ra) * EPS
  if not (step > 0) then step = 4.9406564584124654e-324 end
  for _ = 1, 1100 do
    ra = ra + step
    if ok(now + ra) then return ra end
    step = step * 2
  end
  return INF
end

local function m53(x)
  if x == 0 then return 0, 0 end
  if x == INF then return 1, 99999 end
  local m, e = frexp(x)
  return m * 9007199254740992, e
end
`

const epilogue = `
local out = {}
for i = 1, #KEYS do
  local allowed, remaining, retry, reset, delay, start = decide(KEYS[i], tonumber(ARGV[6 + i]))
  local b = (i - 1) * 10
  if allowed then out[b + 1] = 1 else out[b + 1] = 0 end
  out[b + 2] = remaining
  out[b + 3], out[b + 4] = m53(retry)
  out[b + 5], out[b + 6] = m53(reset)
  out[b + 7], out[b + 8] = m53(delay or 0)
  out[b + 9], out[b + 10] = m53(start or 0)
end
return out
`

// gcraBody: P1 rate (units/s), P2 burst. State: a string key holding TAT,
// written only when the request is allowed.
const gcraBody = `
local rate, burst = P1, P2
local interval = 1 / rate
local tau = (burst - 1) * interval
local slack = burst * EPS

local function limit(x) return tau + x * slack end

local function remaining(x)
  local ahead, lim = x - now, limit(x)
  local k = floor((lim - ahead) * rate) + 1
  if not (k > 0) then return 0 end
  if k > burst then k = burst end
  if k > 0 and ahead + (k - 1) * interval > lim then
    k = k - 1
  elseif k < burst and ahead + k * interval <= lim then
    k = k + 1
  end
  return k
end

local function decide(key, cost)
  local tat = tonumber(redis.call('GET', key)) or 0
  if now > tat then tat = now end
  if cost <= 0 then return true, remaining(tat), 0, tat - now end
  local extra = (cost - 1) * interval
  local wait = tat - now + extra
  if wait > limit(tat) then
    local retry = INF
    if cost <= burst then
      retry = settle(wait - tau, function(t)
        local x = tat
        if t > x then x = t end
        return x - t + extra <= limit(x)
      end)
    end
    return false, remaining(tat), retry, tat - now
  end
  tat = tat + cost * interval
  redis.call('SET', key, tat, 'PX', ttl(tat - now))
  return true, remaining(tat), 0, tat - now
end
`

// tokenBucketBody: P1 rate, P2 burst. State: hash {t: tokens, l: time of
// the last refill}; a missing key is a full bucket. Under a scale (P1 below
// the rule's own rate R1) the key is kept until the bucket is full at both
// rates: a missing key is the rule's full Burst R2 to a later decision at
// scale 1.
const tokenBucketBody = `
local rate, burst = P1, P2
local scaled = rate ~= R1

local function decide(key, cost)
  local s = redis.call('HMGET', key, 't', 'l')
  local tokens, last = tonumber(s[1]), tonumber(s[2])
  if tokens == nil or last == nil then
    tokens, last = burst, now
  else
    local elapsed = now - last
    if elapsed < 0 then elapsed = 0 else last = now end
    tokens = tokens + elapsed * rate
    if tokens > burst then tokens = burst end
  end
  local allowed = cost <= 0 or tokens >= cost
  if allowed and cost > 0 then tokens = tokens - cost end
  local reset = (burst - tokens) / rate
  local keep = reset
  if scaled then
    local own = (R2 - tokens) / R1
    if own > keep then keep = own end
  end
  redis.call('HSET', key, 't', tokens, 'l', last)
  redis.call('PEXPIRE', key, ttl(keep))
  local retry = 0
  if not allowed then
    retry = INF
    if cost <= burst then
      retry = settle(last + (cost - tokens) / rate - now, function(t)
        local elapsed = t - last
        if elapsed < 0 then elapsed = 0 end
        local v = tokens + elapsed * rate
        if v > burst then v = burst end
        return v >= cost
      end)
    end
  end
  return allowed, floor(tokens), retry, reset
end
`

// leakyMeterBody: P1 rate, P2 burst. State: hash {v: level, l: time of the
// last leak}; a missing key is an empty bucket. Remaining is Burst − level
// truncated toward zero, as Go's int(): under a scale the level can exceed
// the scaled Burst.
const leakyMeterBody = `
local rate, burst = P1, P2

local function decide(key, cost)
  local s = redis.call('HMGET', key, 'v', 'l')
  local level, last = tonumber(s[1]) or 0, tonumber(s[2]) or 0
  local elapsed = now - last
  if elapsed < 0 then elapsed = 0 else last = now end
  level = level - elapsed * rate
  if level < 0 then level = 0 end
  local allowed = cost <= 0 or cost <= burst - level
  if allowed and cost > 0 then level = level + cost end
  local reset = level / rate
  redis.call('HSET', key, 'v', level, 'l', last)
  redis.call('PEXPIRE', key, ttl(reset))
  local retry = 0
  if not allowed then
    retry = INF
    if cost <= burst then
      retry = settle(last + (level + cost - burst) / rate - now, function(t)
        local e = t - last
        if e < 0 then e = 0 end
        local v = level - e * rate
        if v < 0 then v = 0 end
        return cost <= burst - v
      end)
    end
  end
  local room = burst - level
  if room < 0 then room = ceil(room) else room = floor(room) end
  return allowed, room, retry, reset
end
`

// leakyQueueBody: P1 rate, P2 queue size. State: a sorted set with one
// member per waiting unit (score: its release time; member: the instant
// its request started, '/', and the unit's number in the request, with 17
// significant digits: unique) and the member 'f', whose score is the next
// free release time: one interval after the newest release, so 'f' is
// always the last member ('f' also sorts after any number on a tie), and a
// set without 'f' is empty. The release times are stored, not derived from
// the oldest one, because a queue's units may have been spaced at
// different rates (the rate can change while units wait: Store.SetScale),
// as the in-memory ring stores them. Units that have left are removed at
// once, even by a refused request (as in memory: a clock that then steps
// back must not see them again); a unit released at once (at now) is never
// stored.
const leakyQueueBody = `
local rate, size = P1, P2
local interval = 1 / rate

local function decide(key, cost)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  local top = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
  local n, back, nextFree = 0, 0, 0
  if #top == 4 then
    back, nextFree = tonumber(top[2]), tonumber(top[4])
    n = redis.call('ZCARD', key) - 1
  elseif #top == 2 then
    nextFree = tonumber(top[2])
  end

  local function reset()
    if n == 0 then return 0 end
    return back - now
  end

  if cost <= 0 then return true, size - n, 0, reset() end
  if n + cost > size then
    local retry = INF
    if cost <= size then
      local k = n + cost - size
      local release = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
      retry = settle(release - now, function(t) return release <= t end)
    end
    return false, size - n, retry, reset()
  end
  local out = nextFree
  if now > out then out = now end
  local member = string.format('%.17g', out) .. '/'
  local args, j, x = {}, 0, out
  for i = 1, cost do
    if x > now then
      args[j + 1] = x
      args[j + 2] = member .. i
      j = j + 2
      back, n = x, n + 1
      if j >= 1000 then
        redis.call('ZADD', key, unpack(args, 1, j))
        j = 0
      end
    end
    x = x + interval
  end
  nextFree = x
  args[j + 1] = nextFree
  args[j + 2] = 'f'
  redis.call('ZADD', key, unpack(args, 1, j + 2))
  redis.call('PEXPIRE', key, ttl(nextFree - now))
  return true, size - n, 0, reset(), out - now, out
end
`

// fixedWindowBody: P1 limit, P2 window (seconds). State: hash {c: count,
// w: window number floor(now/window)}.
const fixedWindowBody = `
local limit, window = P1, P2

local function decide(key, cost)
  local s = redis.call('HMGET', key, 'c', 'w')
  local count, win = tonumber(s[1]) or 0, tonumber(s[2])
  local wf = floor(now / window)
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
  if allowed and cost > 0 then count, changed = count + cost, true end
  local finish = (wf + 1) * window
  local reset, retry = 0, 0
  if count > 0 then reset = finish - now end
  if changed then
    if count > 0 then
      redis.call('HSET', key, 'c', count, 'w', win)
      redis.call('PEXPIRE', key, ttl(finish - now))
    else
      redis.call('DEL', key)
    end
  end
  if not allowed then
    retry = INF
    if cost <= limit then
      retry = settle(finish - now, function(t)
        local b = floor(t / window) - win
        if b == 0 or (b < 0 and b >= -STEPBACK and count > 0) then
          return count + cost <= limit
        end
        return true
      end)
    end
  end
  return allowed, limit - count, retry, reset
end
`

// slidingCounterBody: P1 limit, P2 window (seconds). State: hash {p:
// previous window's count, c: current count, w: current window number}.
const slidingCounterBody = `
local limit, window = P1, P2

local function roll(t, p, c, w)
  local f = floor(t / window)
  local b = f - w
  if b ~= 0 then
    if b < 0 and b >= -STEPBACK and (p > 0 or c > 0) then return w, 1, p, c, w end
    if b == 1 then p = c else p = 0 end
    c, w = 0, f
  end
  return f, 1 - (t - f * window) / window, p, c, w
end

local function fits(base, c, k) return base + (c + k - 1) < limit end

local function remaining(base, c)
  local k = ceil(limit - base - c)
  if not (k > 0) then k = 0 end
  if k > limit then k = limit end
  if k > 0 and not fits(base, c, k) then
    k = k - 1
  elseif k < limit and fits(base, c, k + 1) then
    k = k + 1
  end
  return k
end

local function decide(key, cost)
  local s = redis.call('HMGET', key, 'p', 'c', 'w')
  local prev, cur, win = tonumber(s[1]) or 0, tonumber(s[2]) or 0, tonumber(s[3])
  if win == nil then win = floor(now / window) end
  local p0, c0, w0 = prev, cur, win
  local wf, weight
  wf, weight, prev, cur, win = roll(now, prev, cur, win)
  local base = prev * weight
  local allowed = cost <= 0 or fits(base, cur, cost)
  if allowed and cost > 0 then cur = cur + cost end
  local reset, retry = 0, 0
  if cur > 0 then
    reset = (wf + 2) * window - now
  elseif prev > 0 then
    reset = (wf + 1) * window - now
  end
  if prev ~= p0 or cur ~= c0 or win ~= w0 then
    if prev > 0 or cur > 0 then
      redis.call('HSET', key, 'p', prev, 'c', cur, 'w', win)
      redis.call('PEXPIRE', key, ttl(reset))
    else
      redis.call('DEL', key)
    end
  end
  if not allowed then
    retry = INF
    if cost <= limit then
      local room = limit - (cur + cost - 1)
      local at
      if room > 0 and prev > 0 then
        at = wf * window + window * (1 - room / prev)
      else
        at = (wf + 1) * window
        if cur > 0 then
          local q = (limit - (cost - 1)) / cur
          if q < 1 then at = at + window * (1 - q) end
        end
      end
      local sp, sc, sw = prev, cur, win
      retry = settle(at - now, function(t)
        local _, w, p, c = roll(t, sp, sc, sw)
        return fits(p * w, c, cost)
      end)
    end
  end
  return allowed, remaining(base, cur), retry, reset
end
`

// slidingLogBody: P1 limit, P2 window (seconds). State: a sorted set of
// admitted timestamps (score = time; member = "time/i" with the time's 17
// significant digits, unique: i is one more than the entries left after
// trimming, and entries sharing a time were all added after the last trim
// that could remove any of them).
const slidingLogBody = `
local limit, window = P1, P2

local function decide(key, cost)
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at, newest = now, nil
  if top[2] then
    newest = tonumber(top[2])
    if at < newest then at = newest end
  end
  local cut = at - window
  local n = 0
  if newest ~= nil then
    if newest <= cut then
      redis.call('DEL', key)
    else
      redis.call('ZREMRANGEBYSCORE', key, '-inf', cut)
      n = redis.call('ZCARD', key)
    end
  end
  local allowed = cost <= 0 or n + cost <= limit
  if allowed and cost > 0 then
    local member = string.format('%.17g', at) .. '/'
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
    n, newest = n + cost, at
  end
  local reset, retry = 0, 0
  if n > 0 then
    reset = newest + window - now
    redis.call('PEXPIRE', key, ttl(reset))
  end
  if not allowed then
    retry = INF
    if cost <= limit then
      local k = n + cost - limit
      local ts = tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
      local nb = newest
      retry = settle(ts + window - now, function(t)
        if t < nb then t = nb end
        return ts <= t - window
      end)
    end
  end
  return allowed, limit - n, retry, reset
end
`

// script is one algorithm's Lua source and its SHA-1 (the EVALSHA digest).
type script struct {
	src string
	sha string
}

func newScript(body string) script {
	src := prelude + body + epilogue
	sum := sha1.Sum([]byte(src))
	return script{src: src, sha: hex.EncodeToString(sum[:])}
}

// scripts holds each algorithm's script, indexed by ratelimit.Algorithm.
var scripts = [...]script{
	ratelimit.AlgTokenBucket:    newScript(tokenBucketBody),
	ratelimit.AlgLeakyMeter:     newScript(leakyMeterBody),
	ratelimit.AlgLeakyQueue:     newScript(leakyQueueBody),
	ratelimit.AlgFixedWindow:    newScript(fixedWindowBody),
	ratelimit.AlgSlidingLog:     newScript(slidingLogBody),
	ratelimit.AlgSlidingCounter: newScript(slidingCounterBody),
	ratelimit.AlgGCRA:           newScript(gcraBody),
}
