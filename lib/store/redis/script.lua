--[[
script.lua - weir's Redis script, wire format 2 (lib/store/redis/codec.h).

Runs every algorithm of weir/algo.h on state kept in Redis and decides
exactly as the C step functions (lib/algo/*.c) decide on their own state,
for every limit weir__redis_limit_fits() accepts; an atomic batch runs as
the memory store's run_atomic() does (lib/store/memstore.c).

Keys: one per op (format 3: no key declared, and "3", k and the keys
come first among the arguments). Arguments: 2 (the format), L, L limits (each one
argument, "algorithm limit window_us burst sub_windows unit rate
capacity", and for a token bucket with a warm-up " warmup_us
cold_factor" after them), m, then per batch "now flags n" and 4 per op:
kind hits lease and the index (1 .. L) of its limit (a TAKE's lease is
its reserve: the units it must leave free, 0 for none;
weir_step_reserve()). Reply: Redis's TIME in microseconds when a batch's
now was "-" (else 0), then per op its status when it failed, else limit
x 8 + flags (1 allowed, 2 delay follows, 4 lease follows), remaining,
reset_after, and the retry_after of a denial, the delay and the lease
when flagged.

Two ways to run it: as a script (EVAL, EVALSHA), or, on Redis 7, loaded
once as a function library ("#!lua name=<library>" and this text, FUNCTION
LOAD) and called as FCALL weir_v2, with the same arguments after the name.
A script sets up its helpers again at every call; a library does it once.

State, one key per op (times in integer microseconds):
  token_bucket, leaky_bucket, leaky_bucket_shaper (1, 3, 4)
      a string, struct "<Bdd": the algorithm, the level (in 1/unit of a
      request), the time of the last charge; a token bucket with a
      warm-up, "<Bddd": and the key's heat (microseconds, 0 .. warmup_us).
  gcra (2)
      "<Bdd": 2, the TAT's whole microseconds, the nanoseconds past them.
  fixed_window (5)
      "<Bdd": 5, the window's index, its count.
  sliding_window_counter (7)
      "<Bd" and k+1 "d": 7, the newest sub-window's index, a ring of k+1
      counters (sub-window i in slot i mod (k+1)).
  sliding_window_log (6)
      a sorted set with a member per unit admitted: score = the admission
      time, member = the unit's serial number as a big-endian double, so
      the units of one time sort in admission order. At most `limit`.
  concurrency (8)
      a sorted set with a member per unit held: score = the lease's expiry,
      member = ">dd" (lease id, unit 0 .. hits-1); and member "#" whose
      score is SEQ + the last lease id given out, above every expiry, so
      that ZRANGE -2 -1 reads the newest lease and the id counter at once.
      A key made afresh (the last one expired with its leases) counts its
      ids from 256 per millisecond of the time, so a token of a lease
      that timed out never names a lease of the new key (unless a key
      gave out more than 256 leases a millisecond over its whole life);
      ids stay below 2^53 - SEQ until the year 2094 (later, a fresh
      key's ids start from ID_BASE_MAX).
A state that is not this algorithm's or not valid for the limit is a fresh
key, replaced when the op charges. After a charge the key expires when it is
back at rest: reset_after rounded up to a millisecond (from the end of the
call, where the writes are made; a sorted set's 2 ms at least: see
`expire`); a release leaves the expiry the last acquire set, so the lease
ids live as long as a lease.

Cost: Redis pays for every command the script calls and for every argument
and reply integer, so a call reads every string state with one MGET,
writes each string key it charged once, at the end (PSETEX, its last
value), and sends each limit once; a library keeps what it parsed and the
tables it fills from call to call; the ops' results are as short as the
format allows.

Exactness: Lua numbers are doubles, so every quantity held stays below 2^53
(times are below 2^52; weir__redis_limit_fits() bounds the limits). Every
division goes through idiv()/cdiv() (or their steps inline, where hot),
which correct the rounded quotient;
products that may pass 2^53 (the sliding counter's count x sub-window) go
through muldiv(), which compares exact products of 24-bit limbs. GCRA's
TAT, nanoseconds in C, is kept as microseconds and the nanoseconds past
them, and decided in ticks of d = gcd(unit, 1000) ns counted from now, so
the numbers held are bounded by the capacity in ticks.
]]

-- Lua's own functions, bound at the first call (a library being loaded
-- sees no globals but `redis`).
local tonumber, type, floor, unpack, pairs, tostring
local spack, sunpack, ssub, srep, sfmt, smatch

local function bind()
    local G = _G
    tonumber, type, floor, unpack = G.tonumber, G.type, G.math.floor, G.unpack
    pairs, tostring = G.pairs, G.tostring
    spack, sunpack = G.struct.pack, G.struct.unpack
    ssub, srep, sfmt, smatch = G.string.sub, G.string.rep, G.string.format, G.string.match
end

local OK, EINVAL, ENOLEASE, EALGO = 0, -1, -4, -9
local P51, P52, P53 = 2251799813685248, 4503599627370496, 9007199254740992
-- concurrency: "#" scores start here, above any expiry (2^52 + 100 years)
local SEQ = 8000000000000000
-- where a fresh concurrency key's lease ids start at the latest: 2^32 ids
-- below the largest SEQ + id a double holds exactly
local ID_BASE_MAX = 1007194959773696
local SHAPER = 4
local CHUNK = 500 -- members per ZADD (a Lua call takes at most 8000 arguments)

---------------------------------------------------------------- arithmetic

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1. The rounded quotient is
-- at most one above the floor, and then q*b = a + 1 is exact. (x - x % 1
-- is floor(x), exactly, without a call.)
local function idiv(a, b)
    local q = a / b
    q = q - q % 1
    if q * b > a then
        return q - 1
    end
    return q
end

-- ceil(a / b), same domain
local function cdiv(a, b)
    local q = a / b
    q = q - q % 1
    if q * b < a then
        return q + 1
    end
    return q
end

local L24, L48 = 16777216, 281474976710656

-- The sign of a*b - c*d for integers 0 <= a, b, c, d < 2^53, exactly: each
-- split into 24-bit limbs, whose products and their sums stay below 2^53.
local function cmp_prod(a, b, c, d)
    local a2 = floor(a / L48)
    local a1 = floor((a - a2 * L48) / L24)
    local a0 = a - a2 * L48 - a1 * L24
    local b2 = floor(b / L48)
    local b1 = floor((b - b2 * L48) / L24)
    local b0 = b - b2 * L48 - b1 * L24
    local c2 = floor(c / L48)
    local c1 = floor((c - c2 * L48) / L24)
    local c0 = c - c2 * L48 - c1 * L24
    local d2 = floor(d / L48)
    local d1 = floor((d - d2 * L48) / L24)
    local d0 = d - d2 * L48 - d1 * L24
    local t0 = a0 * b0 - c0 * d0
    local t1 = a0 * b1 + a1 * b0 - c0 * d1 - c1 * d0
    local t2 = a0 * b2 + a1 * b1 + a2 * b0 - c0 * d2 - c1 * d1 - c2 * d0
    local t3 = a1 * b2 + a2 * b1 - c1 * d2 - c2 * d1
    local t4 = a2 * b2 - c2 * d2
    -- carry upwards: t0..t3 end in [0, 2^24), t4 takes the sign
    local k = floor(t0 / L24)
    t0 = t0 - k * L24
    t1 = t1 + k
    k = floor(t1 / L24)
    t1 = t1 - k * L24
    t2 = t2 + k
    k = floor(t2 / L24)
    t2 = t2 - k * L24
    t3 = t3 + k
    k = floor(t3 / L24)
    t3 = t3 - k * L24
    t4 = t4 + k
    if t4 > 0 then
        return 1
    elseif t4 < 0 then
        return -1
    elseif t0 + t1 + t2 + t3 > 0 then
        return 1
    end
    return 0
end

-- floor(a * b / c) for integers 0 <= a, b < 2^53, 1 <= c < 2^53 whose
-- quotient is below 2^52: the rounded quotient, corrected by exact compares.
local function muldiv(a, b, c)
    local p = a * b
    if p < P53 then -- then the product is exact
        return idiv(p, c)
    end
    local q = floor(p / c)
    while cmp_prod(q, c, a, b) > 0 do
        q = q - 1
    end
    while cmp_prod(q + 1, c, a, b) <= 0 do
        q = q + 1
    end
    return q
end

-- ceil(a * b / c), same domain
local function muldiv_up(a, b, c)
    local p = a * b
    if p < P53 then
        return cdiv(p, c)
    end
    local q = muldiv(a, b, c)
    if cmp_prod(q, c, a, b) < 0 then
        return q + 1
    end
    return q
end

-- x is an integer in [lo, hi] (false for NaN)
local function int_in(x, lo, hi)
    return x >= lo and x <= hi and x % 1 == 0
end

---------------------------------------------------------------- state

-- The call's: its keys, redis.call and redis.pcall (which a library has
-- only while it runs).
local Keys, rcall, rpcall

-- The reply, made as the ops are decided: `nout` integers so far. A
-- library keeps the table from call to call (no table to grow at each
-- call); Redis reads it up to the first nil.
local reply, nout = {}, 0

-- Put an op's result in the reply (codec.h: a failed op's status; else
-- limit x 8 + flags, remaining, reset_after, and retry_after, delay, lease
-- as need be). The hot paths put theirs themselves.
local function emit(st, al, li, re, rs, rt, de, le)
    local n = nout
    if st ~= OK then
        reply[n + 1], nout = st, n + 1
    elseif al == 0 then
        reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = li * 8, re, rs, rt
        nout = n + 4
    else
        local h = li * 8 + 1
        if de > 0 then
            h = h + 2
        end
        if le > 0 then
            h = h + 4
        end
        reply[n + 1], reply[n + 2], reply[n + 3] = h, re, rs
        n = n + 3
        if de > 0 then
            reply[n + 1], n = de, n + 1
        end
        if le > 0 then
            reply[n + 1], n = le, n + 1
        end
        nout = n
    end
end

-- String states. fetched[i] is op i's key as one MGET read it at the
-- start of the call (false: no key, or one of another type, which MGET
-- reads as nil: a fresh state as it is). slot[key] is what the call did to
-- the key since: nil nothing; STALE a sorted-set op changed it (read it
-- again); else k, its entry in wv, wt, wk: the value the call wrote (or
-- read again), the TTL to write it with, and the key while that write is
-- still to be made. One PSETEX per entry at the end of the call, of the
-- last value written (a key charged by several batches is written once);
-- a sorted-set op on such a key writes it first (flush()), so that Redis
-- holds what the ops before it wrote. A library keeps wv, wt, wk (nw
-- entries this call) from call to call.
local fetched, slot
local nw, wv, wt, wk = 0, {}, {}, {}
local STALE = 0

local function sget(key, i)
    local k = slot[key]
    if k == nil then
        return fetched[i]
    elseif k ~= STALE then
        return wv[k]
    end
    local v = rpcall('GET', key)
    if type(v) ~= 'string' then
        v = false
    end
    nw = nw + 1
    slot[key], wv[nw], wk[nw] = nw, v, false
    return v
end

-- The fixed-size string state of op i's key (bucket, GCRA, fixed window:
-- a tag and two numbers; `warm`: a token bucket with a warm-up, and its
-- heat), or nothing when absent or of another shape. (struct.unpack adds
-- the position after the values: a caller takes only what it asked for.)
local function state3(key, i, warm)
    local v = sget(key, i)
    if v then
        if #v == 17 and not warm then
            return sunpack('<Bdd', v)
        elseif #v == 25 and warm then
            return sunpack('<Bddd', v)
        end
    end
end

local function flush(key)
    local k = slot[key]
    if k and k ~= STALE and wk[k] then
        rcall('PSETEX', key, wt[k], wv[k])
        wk[k] = false
    end
end

-- Sorted sets written by this call (a table once there is one), and when
-- they are back at rest (microseconds from their op's now): one PEXPIRE
-- each at the end of the call, of at least 2 ms, unless a string state
-- replaced the set since. (Redis 7.0's PEXPIRE deletes the key at once
-- when its expiry is not past the current millisecond, which a 1 ms TTL
-- is if the clock ticks during the command; PSETEX never deletes.)
local expire

-- A sorted-set op changed `key` (and it is at rest `reset_us` from now).
local function zchanged(key, reset_us)
    slot[key] = STALE
    if reset_us then
        expire = expire or {}
        expire[key] = reset_us
    end
end

-- TTLs go as text: Redis formats a number argument with "%.17g" (7.2: its
-- shortest form, with an exponent past 7 trailing zeros, which it does not
-- take for an integer), dearer than "%d" here; and those of fewer than
-- TTL_MEMO milliseconds are made once (a library keeps them).
local TTL_MEMO = 10000
local ttl_text = {}

-- A TTL of reset_us rounded up to a millisecond.
local function ttl_ms(reset_us)
    local ms = cdiv(reset_us, 1000)
    if ms < TTL_MEMO then
        local t = ttl_text[ms]
        if not t then
            t = sfmt('%d', ms)
            ttl_text[ms] = t
        end
        return t
    end
    return sfmt('%d', ms)
end

-- An atomic batch's first pass charges its TAKEs when each is its key's
-- only op and the state a string (the decision is the charge's already),
-- and undoes them if a TAKE is denied. The entries it makes are those past
-- the batch's first, nw0; and it keeps here how to undo the rest (nundo of
-- them: a key that was STALE, or a key and its entry's value, TTL and key
-- before).
local planning, nw0, nundo, undo = false, 0, 0, {}

-- Key's string state is v now, at rest reset_us from now (written at the
-- end of the call).
local function sset(key, v, reset_us)
    local ms = reset_us / 1000 -- cdiv(reset_us, 1000), as ttl_ms()
    ms = ms - ms % 1
    if ms * 1000 < reset_us then
        ms = ms + 1
    end
    local ttl = ttl_text[ms] or ttl_ms(reset_us)
    local k = slot[key]
    if k == nil then
        k = nw + 1
        nw, slot[key] = k, k
    elseif k == STALE then
        if planning then
            undo[nundo * 4 + 1], undo[nundo * 4 + 2], nundo = key, STALE, nundo + 1
        end
        k = nw + 1
        nw, slot[key] = k, k
    elseif planning then
        local u = nundo * 4
        undo[u + 1], undo[u + 2], undo[u + 3], undo[u + 4] = key, wv[k], wt[k], wk[k]
        nundo = nundo + 1
    end
    wv[k], wt[k], wk[k] = v, ttl, key
end

-- Undo the writes of the planning pass: an entry one changed is as it was
-- (a value: a string or false), one it made is dropped (its key's slot as
-- it was: STALE or nil).
local function unplan()
    for u = nundo * 4 - 4, 0, -4 do
        local key, was = undo[u + 1], undo[u + 2]
        local k = slot[key]
        if was == STALE then
            slot[key], wk[k] = STALE, false
        else
            wv[k], wt[k], wk[k] = was, undo[u + 3], undo[u + 4]
        end
    end
    nundo = 0
    for k = nw0 + 1, nw do
        local key = wk[k]
        if key and slot[key] == k then
            slot[key], wk[k] = nil, false
        end
    end
end

-- ZADD `count` members at one score: the serials first.. as ">d", or, for
-- a lease, (lease, first..) as ">dd"; then the extra pair if any.
local function zadd_run(key, score, count, first, lease, extra_score, extra_member)
    local args, n = {}, 0
    for i = first, first + count - 1 do
        args[n + 1] = score
        args[n + 2] = lease and spack('>dd', lease, i) or spack('>d', i)
        n = n + 2
        if n == 2 * CHUNK then
            rcall('ZADD', key, unpack(args, 1, n))
            n = 0
        end
    end
    if extra_member then
        args[n + 1] = extra_score
        args[n + 2] = extra_member
        n = n + 2
    end
    if n > 0 then
        rcall('ZADD', key, unpack(args, 1, n))
    end
end

---------------------------------------------------------------- algorithms
-- Each decides one TAKE (write = true: charge when admitted) or CHECK
-- (write = false) of cost `hits` at `now` under the limit L (see lim()),
-- for op i on `key`, puts its result in the reply (see emit()), and
-- returns allowed (0/1). The limit is not a ban.

local function drain_time(units, rate)
    if rate == 1 then
        return units
    end
    return cdiv(units, rate)
end

-- bucket.c's warm-up (L.warm > 0, a token bucket): the heat `elapsed`
-- microseconds after a charge that left `level` (busy first, then at rest)
local function heat_after(L, heat, level, elapsed)
    local busy = drain_time(level, L.rate)
    if busy > elapsed then
        busy = elapsed
    end
    heat = heat + busy
    if heat > L.warm then
        heat = L.warm
    end
    heat = heat - (elapsed - busy)
    return heat > 0 and heat or 0
end

-- The units a request of h (<= burst) costs at `heat`: h * unit * cf * W /
-- (W + (cf - 1) * heat) rounded up, at most the capacity
local function warm_cost(L, h, heat)
    local c = muldiv_up(h * L.unit, L.cold, L.warm + L.cf1 * heat)
    return c < L.cap and c or L.cap
end

-- g(d): the wait h needs at the cost it would have d microseconds on, the
-- bucket at `level` (> 0) and the key at `heat` now (it warms all the wait
-- long); 0 when that cost fits
local function wait_at(L, level, heat, h, d)
    local hd = heat + d
    if hd > L.warm then
        hd = L.warm
    end
    local over = level - (L.cap - warm_cost(L, h, hd))
    return over > 0 and drain_time(over, L.rate) or 0
end

-- The least wait d for a denied h, g(d) <= d: g falls as d grows, so g(0)
-- is enough and nothing below g(hi) is; a few rounds narrow the bracket,
-- bisection closes it (warmup.c)
local function warm_wait(L, level, heat, h)
    local hi = wait_at(L, level, heat, h, 0)
    local lo = wait_at(L, level, heat, h, hi) - 1
    if lo < 0 then
        lo = 0
    end
    for _ = 1, 3 do
        if hi - lo <= 1 then
            break
        end
        local x = wait_at(L, level, heat, h, lo + 1)
        if x < lo + 1 then
            x = lo + 1
        end
        if x < hi then
            hi = x
        end
        x = wait_at(L, level, heat, h, hi) - 1
        if x > lo then
            lo = x
        end
    end
    while hi - lo > 1 do
        local mid = lo + floor((hi - lo) / 2)
        if wait_at(L, level, heat, h, mid) <= mid then
            hi = mid
        else
            lo = mid
        end
    end
    return hi
end

-- bucket.c: the token bucket, the leaky bucket policer and shaper
local function bucket(key, L, now, hits, write, i)
    local algo, burst, unit, rate, cap, warm = L.algo, L.burst, L.unit, L.rate, L.cap, L.warm
    local level, last, heat = 0, 0, 0
    local tag, l, t, h = state3(key, i, warm > 0)
    if tag == algo and l >= 0 and l <= cap and l % 1 == 0 and t >= 0 and t <= P52 and
        t % 1 == 0 and (warm == 0 or (h >= 0 and h <= warm and h % 1 == 0)) then
        level, last, heat = l, t, warm > 0 and h or 0
    end
    -- a clock that went backwards drains nothing
    local t = last > now and last or now
    if warm > 0 then
        heat = heat_after(L, heat, level, t - last)
    end
    local drained = (t - last) * rate -- if it rounds, it is far above the level
    if drained >= level then
        level = 0
    else
        level = level - drained
    end
    local back = t - now
    local need = (hits > 0 and hits or 1) * unit
    if warm > 0 and hits <= burst then
        need = warm_cost(L, hits > 0 and hits or 1, heat)
    end
    local allowed, retry, delay, after = 0, 0, 0, level
    if hits <= burst and need <= cap - level then
        allowed = 1
        if hits > 0 then
            if algo == SHAPER and level > 0 then
                delay = drain_time(level, rate) + back
            end
            after = level + need
        end
    elseif hits > burst then
        retry = -1
    elseif warm > 0 then
        retry = warm_wait(L, level, heat, hits > 0 and hits or 1) + back
    else
        retry = drain_time(level - (cap - need), rate) + back
    end
    local reset = 0
    if after > 0 then
        reset = (rate == 1 and after or cdiv(after, rate)) + back
    end
    local one = unit
    if warm > 0 then
        -- at rest once drained and then cold
        local rest = after > 0 and reset - back or 0
        local hot = heat + rest
        rest = rest + (hot < warm and hot or warm)
        reset = rest > 0 and rest + back or 0
        one = warm_cost(L, 1, heat)
    end
    if write and allowed == 1 and hits > 0 then
        if warm > 0 then
            sset(key, spack('<Bddd', algo, after, t, heat), reset)
        else
            sset(key, spack('<Bdd', algo, after, t), reset)
        end
    end
    local x = cap - after -- remaining: idiv(x, one), inline
    local rem = x / one
    rem = rem - rem % 1
    if rem * one > x then
        rem = rem - 1
    end
    local n = nout
    if allowed == 0 then
        reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = L.head, rem, reset, retry
        nout = n + 4
    elseif delay == 0 then
        reply[n + 1], reply[n + 2], reply[n + 3] = L.head + 1, rem, reset
        nout = n + 3
    else
        emit(OK, 1, burst, rem, reset, 0, delay, 0)
    end
    return allowed
end

-- A decimal of up to 19 digits as (x div 1000, x mod 1000), exactly.
local function split3(s)
    local n = #s
    if n <= 15 then
        local x = tonumber(s)
        local q = idiv(x, 1000)
        return q, x - q * 1000
    end
    return tonumber(ssub(s, 1, n - 3)), tonumber(ssub(s, n - 2))
end

-- gcra.c, in ticks of d = gcd(unit, 1000) ns, m ticks a microsecond
local function gcra(key, L, now, hits, write, i)
    local burst, d, m, unit, cap = L.burst, L.d, L.m, L.tunit, L.tcap
    -- the TAT: whole microseconds, and ticks past them
    local tat_us, tat_t = 0, 0
    local tag, x, y = state3(key, i)
    if tag == 2 and x >= 0 and x <= P52 + P51 and x % 1 == 0 and y >= 0 and y <= 999 and
        y % 1 == 0 then
        -- between two ticks only if the limit changed: round it up
        -- (a unit of whole microseconds: d = 1000, m = 1, one tick)
        tat_us, tat_t = x, m == 1 and (y > 0 and 1 or 0) or cdiv(y, d)
        if tat_t == m then
            tat_us, tat_t = x + 1, 0
        end
    end
    -- the backlog, TAT - now (0 when the TAT has passed): b_us and b_t ticks
    local b_us, b_t = 0, 0
    if tat_us >= now then
        b_us, b_t = tat_us - now, tat_t
    end
    -- far past the capacity (a clock that went back) it is not held whole
    local big = b_us * m > cap
    local backlog = 0
    if not big then
        backlog = b_us * m + b_t
    end
    local need = (hits > 0 and hits or 1) * unit
    local allowed, retry, remaining, reset = 0, 0, 0, 0
    if hits <= burst and not big and backlog <= cap - need then
        allowed = 1
        backlog = backlog + (hits > 0 and need or 0)
    elseif hits > burst then
        retry = -1
    elseif big then
        local y = (cap - need) - b_t
        if y >= 0 then
            retry = b_us - idiv(y, m)
        else
            retry = b_us + 1
        end
    else
        retry = cdiv(backlog - (cap - need), m)
    end
    if big then
        reset = b_us + (b_t > 0 and 1 or 0)
    else
        reset = m == 1 and backlog or cdiv(backlog, m)
        if backlog < cap then
            local x = cap - backlog -- idiv(x, unit), inline
            remaining = x / unit
            remaining = remaining - remaining % 1
            if remaining * unit > x then
                remaining = remaining - 1
            end
        end
    end
    if write and allowed == 1 and hits > 0 then
        local q = m == 1 and backlog or idiv(backlog, m)
        sset(key, spack('<Bdd', 2, now + q, (backlog - q * m) * d), reset)
    end
    local n = nout
    if allowed == 0 then
        reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = L.head, remaining, reset, retry
        nout = n + 4
    else
        reply[n + 1], reply[n + 2], reply[n + 3] = L.head + 1, remaining, reset
        nout = n + 3
    end
    return allowed
end

-- fixed_window.c
local function fixed(key, L, now, hits, write, i)
    local limit, window = L.limit, L.window
    local w, count = 0, 0
    local tag, x, y = state3(key, i)
    if tag == 5 and x >= 0 and x * window <= P52 and x % 1 == 0 and y >= 0 and
        y <= limit and y % 1 == 0 then
        w, count = x, y
    end
    -- an earlier window than the state's (the clock went back) is the state's
    local cw = now / window -- idiv(now, window), inline
    cw = cw - cw % 1
    if cw * window > now then
        cw = cw - 1
    end
    if cw <= w then
        cw = w
    else
        count = 0
    end
    local fin = (cw + 1) * window
    local need = hits > 0 and hits or 1
    local allowed, retry = 0, 0
    if need <= limit - count then
        allowed = 1
        if hits > 0 then
            count = count + hits
            if write then
                sset(key, spack('<Bdd', 5, cw, count), fin - now)
            end
        end
    elseif need > limit then
        retry = -1
    else
        retry = fin - now
    end
    local n = nout
    if allowed == 0 then
        reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] =
            L.head, limit - count, count > 0 and fin - now or 0, retry
        nout = n + 4
    else
        reply[n + 1], reply[n + 2], reply[n + 3] =
            L.head + 1, limit - count, count > 0 and fin - now or 0
        nout = n + 3
    end
    return allowed
end

-- The sliding counter's count of sub-window i, as seen from sub-window
-- >= cur; c is the unpacked state (counters from c[3]) or nil (fresh).
local function count_at(c, cur, n, i)
    if not c or i > cur or i < 0 or i <= cur - n then
        return 0
    end
    return c[3 + i - idiv(i, n) * n]
end

-- Earliest offset >= e0 into a sub-window whose full sub-windows hold f
-- and whose sliding-out one holds o where `need` fits; -1 if none.
local function fit_offset(limit, s, f, o, e0, need)
    if f + need > limit then
        return -1
    end
    if o == 0 then
        return e0
    end
    -- o * (s - e) <= r * s  <=>  e >= s - floor(r * s / o)
    local r = limit - f - need
    local e = 0
    if r < o then
        e = s - muldiv(r, s, o)
    end
    if e < e0 then
        e = e0
    end
    return e < s and e or -1
end

-- sliding_counter.c: k sub-windows of s, k + 1 counters
local function counter(key, L, now, hits, write, op)
    local limit, k, s, n, fmt = L.limit, L.k, L.span, L.k + 1, L.fmt
    local c, cur, cs = nil, 0, 3 -- cs: the slot of sub-window cur
    local v = sget(key, op)
    if v and #v == 9 + 8 * n then
        c = {sunpack(fmt, v)}
        cur = c[2]
        if c[1] ~= 7 or not int_in(cur, 0, P52) or cur * s > P52 then
            c = nil
        else
            for i = 3, n + 2 do
                local x = c[i]
                if not (x >= 0 and x <= limit and x % 1 == 0) then
                    c = nil
                    break
                end
            end
        end
        if c then
            cs = 3 + cur - idiv(cur, n) * n
        else
            cur = 0
        end
    end
    -- a time before the state's sub-window is its start
    local j = idiv(now, s)
    local e = now - j * s
    if j < cur then
        j, e = cur, 0
    end
    -- the k full sub-windows: those the state holds, slot by slot
    local full = 0
    if c then
        local lo, hi = j - k + 1, j < cur and j or cur
        if lo <= cur - n then
            lo = cur - n + 1
        end
        if lo < 0 then
            lo = 0
        end
        local x = cs - (cur - lo)
        if x < 3 then
            x = x + n
        end
        for _ = lo, hi do
            full = full + c[x]
            x = x == n + 2 and 3 or x + 1
        end
    end
    local old = count_at(c, cur, n, j - k)
    local wold = 0 -- ceil(old * (s - e) / s): the part still in the window
    if old > 0 then
        wold = muldiv_up(old, s - e, s)
    end
    local need = hits > 0 and hits or 1
    local allowed, retry = 0, 0
    if need <= limit and full + need + wold <= limit then
        allowed = 1
        if hits > 0 then
            full = full + hits
        end
    elseif need > limit then
        retry = -1
    else
        -- the estimate only falls as time passes: walk forward a sub-window
        -- at a time (after k + 1 of them it is zero)
        local e0, f, o, i = e, full, old, j
        while true do
            local off = fit_offset(limit, s, f, o, e0, need)
            if off >= 0 then
                retry = i * s + off - now
                break
            end
            e0 = 0
            f = f - count_at(c, cur, n, i - k + 1) + count_at(c, cur, n, i + 1)
            o = count_at(c, cur, n, i + 1 - k)
            i = i + 1
        end
    end
    local used = full + wold
    local remaining = used >= limit and 0 or limit - used
    -- back at rest when the newest non-zero sub-window slides out
    local newest = -1
    if allowed == 1 and hits > 0 then
        newest = j
    else
        local i = cur
        while i > cur - n and i >= 0 do
            if count_at(c, cur, n, i) > 0 then
                newest = i
                break
            end
            i = i - 1
        end
    end
    local reset = 0
    if newest >= 0 then
        local rest = (newest + k + 1) * s
        if rest > now then
            reset = rest - now
        end
    end
    if write and allowed == 1 and hits > 0 then
        if not c then
            c = {7, 0}
            for i = 3, n + 2 do
                c[i] = 0
            end
        end
        -- zero the sub-windows between the state's newest and j
        local slot = 3 + j - idiv(j, n) * n
        local from = cur + 1
        if j - n + 1 > from then
            from = j - n + 1
        end
        local x = slot - (j - from)
        if x < 3 then
            x = x + n
        end
        for _ = from, j do
            c[x] = 0
            x = x == n + 2 and 3 or x + 1
        end
        c[slot] = c[slot] + hits
        sset(key, spack(fmt, 7, j, unpack(c, 3, n + 2)), reset)
    end
    emit(OK, allowed, limit, remaining, reset, retry, 0, 0)
    return allowed
end

-- sliding_log.c
local function slog(key, L, now, hits, write, op)
    local limit, window = L.limit, L.window
    flush(key)
    local top = rpcall('ZRANGE', key, -1, -1, 'WITHSCORES')
    local other = top.err ~= nil -- the key holds something else
    local serial, newest, live = 0, -1, 0
    if not other and top[1] then
        local sc = tonumber(top[2])
        if #top[1] == 8 and int_in(sc, 0, P52) then
            serial, newest = sunpack('>d', top[1]), sc
            other = not int_in(serial, 1, P52)
        else
            other = true
        end
    end
    local t = newest > now and newest or now
    if newest >= 0 and not other then
        -- the units in (t - window, t]
        live = rcall('ZCOUNT', key, t - window + 1, '+inf')
        if live > limit then
            other = true
        end
    end
    if other then
        serial, newest, live, t = 0, -1, 0, now
    end
    local need = hits > 0 and hits or 1
    local allowed, retry, after = 0, 0, live
    if need <= limit - live then
        allowed = 1
        if hits > 0 then
            after = live + hits
            newest = t
        end
    elseif need > limit then
        retry = -1
    else
        -- the (live + need - limit)-th oldest live unit must leave
        local i = need - limit - 1 -- counted from the newest: -live + k - 1
        local r = rcall('ZRANGE', key, i, i, 'WITHSCORES')
        retry = tonumber(r[2]) + window - now
    end
    local reset = 0
    if after > 0 then
        reset = newest + window - now
    end
    if write and allowed == 1 and hits > 0 then
        if other then
            rpcall('DEL', key)
        else
            rcall('ZREMRANGEBYSCORE', key, '-inf', t - window)
        end
        if hits == 1 then
            rcall('ZADD', key, t, spack('>d', serial + 1))
        else
            zadd_run(key, t, hits, serial + 1)
        end
        zchanged(key, reset)
    end
    emit(OK, allowed, limit, limit - after, reset, retry, 0, 0)
    return allowed
end

-- concurrency.c: the newest lease's expiry (or -1), the last id given out,
-- and whether the key holds something else.
local function conc_top(key)
    local top = rpcall('ZRANGE', key, -2, -1, 'WITHSCORES')
    if top.err then
        return -1, 0, true
    end
    local nt = #top
    if nt == 0 then
        return -1, 0, false
    end
    if top[nt - 1] ~= '#' then
        return -1, 0, true
    end
    local seq = tonumber(top[nt]) - SEQ
    if not int_in(seq, 0, P53 - SEQ - 1) then
        return -1, 0, true
    end
    if nt == 2 then
        return -1, seq, false
    end
    local exp = tonumber(top[2])
    if #top[1] ~= 16 or not int_in(exp, 1, SEQ - 1) then
        return -1, 0, true
    end
    return exp, seq, false
end

local function conc(key, L, now, hits, write, op)
    local limit, window = L.limit, L.window
    flush(key)
    local last, seq, other = conc_top(key)
    -- the units held by leases not yet expired
    local held = 0
    if last > now then
        held = rcall('ZCOUNT', key, now + 1, SEQ - 1)
        if held > limit then
            last, seq, other, held = -1, 0, true, 0
        end
    end
    local need = hits > 0 and hits or 1
    if need <= limit - held and hits > 0 then
        if write then
            -- acquire: reap the expired leases, add one of `hits` units
            local exp = now + window
            if last > exp then
                exp = last
            end
            if seq == 0 then -- a fresh key: ids from the time (above)
                seq = floor(now / 1000) * 256
                if seq > ID_BASE_MAX then
                    seq = ID_BASE_MAX
                end
            end
            seq = seq + 1
            if other then
                rpcall('DEL', key)
            elseif last >= 0 then
                rcall('ZREMRANGEBYSCORE', key, 0, now)
            end
            if hits == 1 then
                rcall('ZADD', key, exp, spack('>dd', seq, 0), SEQ + seq, '#')
            else
                zadd_run(key, exp, hits, 0, seq, SEQ + seq, '#')
            end
            zchanged(key, exp - now)
            held = held + hits
            emit(OK, 1, limit, limit - held, exp - now, 0, 0, seq)
            return 1
        end
        -- a check reports the state as if the lease had been taken
        local reset = last > now and last - now or 0
        if reset < window then
            reset = window
        end
        emit(OK, 1, limit, limit - held - hits, reset, 0, 0, 0)
        return 1
    end
    local allowed, retry = 0, 0
    if need <= limit - held then
        allowed = 1
    elseif need > limit then
        retry = -1
    else
        -- the expiry of the lease that frees the (held + need - limit)-th unit
        local i = need - limit - 2 -- from the end, past "#"
        local r = rcall('ZRANGE', key, i, i, 'WITHSCORES')
        retry = tonumber(r[2]) - now
    end
    emit(OK, allowed, limit, held >= limit and 0 or limit - held, last > now and last - now or 0,
        retry, 0, 0)
    return allowed
end

-- weir_release(): reap the expired leases, then give lease `id` back
local function release(key, L, now, id)
    local limit = L.limit
    flush(key)
    if type(rpcall('ZREMRANGEBYSCORE', key, 0, now)) ~= 'number' then
        return ENOLEASE, 0, 0, 0, 0, 0, 0, 0
    end
    local exp = rcall('ZSCORE', key, spack('>dd', id, 0))
    if not exp then
        return ENOLEASE, 0, 0, 0, 0, 0, 0, 0
    end
    zchanged(key)
    -- the lease's units share its expiry; rarely, other leases do too
    local ms = rcall('ZRANGEBYSCORE', key, exp, exp)
    local prefix, mine, nm = spack('>d', id), {}, 0
    for i = 1, #ms do
        if ssub(ms[i], 1, 8) == prefix then
            nm = nm + 1
            mine[nm] = ms[i]
        end
    end
    if nm == #ms then
        rcall('ZREMRANGEBYSCORE', key, exp, exp)
    else
        for i = 1, nm, CHUNK do
            rcall('ZREM', key, unpack(mine, i, i + CHUNK - 1 < nm and i + CHUNK - 1 or nm))
        end
    end
    local last = conc_top(key)
    local held, reset = 0, 0
    if last > now then
        held = rcall('ZCOUNT', key, now + 1, SEQ - 1)
        reset = last - now
    end
    return OK, 1, limit, held >= limit and 0 or limit - held, reset, 0, 0, 0
end

---------------------------------------------------------------- limits

local FAMILY = {bucket, gcra, bucket, bucket, fixed, slog, counter, conc}
-- the algorithms whose state is a string (sget/sset)
local STRING = {true, true, true, true, true, false, true, false}
local LIMIT = '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$'
-- a token bucket with a warm-up: two more, warmup_us and cold_factor
local LIMIT_WARM = '^(%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+) (%d+)$'
local PARSED_MAX = 1000

-- Limits parsed, by their argument. A library keeps them from call to call
-- (PARSED_MAX at most, then it starts over); a script, for its call.
local parsed, nparsed = {}, 0

-- The limit sent as `s`: its fields as numbers, and what its algorithm
-- derives from them (f: the algorithm's function, nil for an unknown one;
-- ban: limit 0). nil when `s` is not a limit.
local function lim(s)
    local L = parsed[s]
    if L then
        return L
    end
    local al, li, wi, bu, k, un, ra, ca = smatch(s, LIMIT)
    local wu, cf
    if not al then
        al, li, wi, bu, k, un, ra, ca, wu, cf = smatch(s, LIMIT_WARM)
        if not al then
            return nil
        end
    end
    L = {algo = tonumber(al), limit = tonumber(li), window = tonumber(wi), burst = tonumber(bu),
         k = tonumber(k), unit = tonumber(un), rate = tonumber(ra), cap = tonumber(ca),
         warm = wu and tonumber(wu) or 0}
    if L.warm > 0 then
        L.cf1, L.cold = tonumber(cf) - 1, tonumber(cf) * L.warm
    end
    L.f, L.string, L.ban = FAMILY[L.algo], STRING[L.algo], L.limit == 0
    -- a result's head (codec.h): its limit is the burst for the buckets
    -- and GCRA, the limit for the others
    L.head = (L.algo <= 4 and L.burst or L.limit) * 8
    if L.algo == 2 then
        -- in ticks of d = gcd(unit, 1000) ns, m ticks a microsecond
        local u_us, u_ns = split3(un)
        local c_us, c_ns = split3(ca)
        local d, r = 1000, u_ns
        while r > 0 do
            d, r = r, d % r
        end
        L.d, L.m = d, 1000 / d
        L.tunit, L.tcap = u_us * L.m + u_ns / d, c_us * L.m + c_ns / d
    elseif L.algo == 7 and L.k >= 1 then
        L.span = L.window / L.k -- k divides the window
        L.fmt = L.k == 1 and '<Bddd' or '<Bd' .. srep('d', L.k + 1)
    end
    if nparsed == PARSED_MAX then
        parsed, nparsed = {}, 0
    end
    parsed[s], nparsed = L, nparsed + 1
    return L
end

---------------------------------------------------------------- batches

-- The call's arguments, and its limits by the index ops name them with
-- (IDX[l]: l's text, made once).
local Argv, Lims
local IDX = {}

-- Numbers of at most 3 digits by their text, as tonumber() gives them
-- (which costs more than a look-up): NUMS[s] or num(s).
local NUMS = {}

local function num(s)
    local v = tonumber(s)
    if #s <= 3 then
        NUMS[s] = v
    end
    return v
end

-- The limit of the op whose arguments start at Argv[a].
local function lim_of(a)
    local L = Lims[Argv[a + 3]]
    if not L then
        error('weir: no limit ' .. tostring(Argv[a + 3]))
    end
    return L
end

-- A TAKE that keeps `reserve` (> 0) units free, weir_step_reserve():
-- admitted only if a check of hits (1 for a peek) + reserve admits, and
-- then charged `hits` only; a denial is that check's.
local function take_reserve(f, key, L, now, hits, reserve, write, i)
    local at = nout
    if f(key, L, now, (hits > 0 and hits or 1) + reserve, false, i) == 0 then
        return 0
    end
    nout = at
    return f(key, L, now, hits, write, i)
end

-- Decide op i under limit L with `hits` (and a TAKE's `reserve`, if any),
-- charging it when `write`, and put its result in the reply. Returns its
-- status and allowed.
local function decide(i, L, now, hits, write, reserve)
    local f = L.f
    if not f then
        emit(EINVAL)
        return EINVAL, 0
    elseif L.ban then -- weir__ban_result()
        emit(OK, 0, 0, 0, 0, -1, 0, 0)
        return OK, 0
    elseif reserve and reserve > 0 then
        return OK, take_reserve(f, Keys[i], L, now, hits, reserve, write, i)
    end
    return OK, f(Keys[i], L, now, hits, write, i)
end

-- A TAKE's reserve, from its op's lease argument Argv[a + 2] (codec.h).
local function reserve_of(a)
    local r = Argv[a + 2]
    if r == '0' then
        return 0
    end
    return tonumber(r)
end

-- weir_op's RESET: the key goes, and a write of it this call still owes
-- with it; the ops after it read it as fresh. Returns 1 when there was a
-- state (in Redis, or written by this call), else 0.
local function reset(key)
    local had, k = 0, slot[key]
    if k and k ~= STALE then
        had = wv[k] and 1 or 0
        wk[k] = false
    end
    if rcall('DEL', key) > 0 then
        had = 1
    end
    nw = nw + 1
    slot[key], wv[nw], wk[nw] = nw, false, false
    return had
end

-- The TTL, in microseconds, `key` has or will have when this call ends;
-- nil when it has none (gone, or never given one).
local function ttl_of(key)
    local k = slot[key]
    if k and k ~= STALE and wk[k] then
        return tonumber(wt[k]) * 1000
    end
    local t = rcall('PTTL', key)
    if t > 0 then
        return t * 1000
    end
    return nil
end

---------------------------------------------------------------- refund, charge
-- weir_refund() and weir_charge() (kinds 4 and 5; REFUND is also the
-- cluster store's, giving back what a batch denied on another node
-- charged). Each reads the state as its algorithm's decision does above
-- (a state that is not the algorithm's or not valid is a fresh key), and
-- reports the key after it as a look reads it (settled()).

-- What a REFUND or CHARGE reports (weir__settled()): the key after it as
-- a look with no hits reads it, with `allowed` and no retry time. A ban
-- holds nothing.
local function settled(key, L, now, allowed, i)
    if L.ban then
        emit(OK, allowed, 0, 0, 0, 0, 0, 0)
        return
    end
    local at = nout
    L.f(key, L, now, 0, false, i)
    local h, re, rs = reply[at + 1], reply[at + 2], reply[at + 3]
    nout = at
    emit(OK, allowed, (h - h % 8) / 8, re, rs, 0, 0, 0)
end

-- A bucket's stored level and last drain (0, 0: fresh), as bucket() reads
-- them, and its level at t, the later of now and the last drain.
local function bucket_state(key, L, now, i)
    local level, last = 0, 0
    local tag, l, t = state3(key, i)
    if tag == L.algo and l >= 0 and l <= L.cap and l % 1 == 0 and t >= 0 and t <= P52 and
        t % 1 == 0 then
        level, last = l, t
    end
    local at = last > now and last or now
    local drained = (at - last) * L.rate -- if it rounds, it is far above the level
    return level, last, drained >= level and 0 or level - drained, at
end

-- GCRA's TAT as gcra() reads it: whole microseconds and ticks past them.
local function gcra_state(key, L, i)
    local m = L.m
    local tag, x, y = state3(key, i)
    if tag == 2 and x >= 0 and x <= P52 + P51 and x % 1 == 0 and y >= 0 and y <= 999 and
        y % 1 == 0 then
        local t = m == 1 and (y > 0 and 1 or 0) or cdiv(y, L.d)
        if t == m then
            return x + 1, 0
        end
        return x, t
    end
    return 0, 0
end

-- The fixed window's window and count as fixed() reads them.
local function fixed_state(key, L, i)
    local tag, x, y = state3(key, i)
    if tag == 5 and x >= 0 and x * L.window <= P52 and x % 1 == 0 and y >= 0 and
        y <= L.limit and y % 1 == 0 then
        return x, y
    end
    return 0, 0
end

-- The sliding counter's state unpacked as counter() reads it (counters
-- from c[3]), or nil.
local function counter_state(key, L, i)
    local n, s = L.k + 1, L.span
    local v = sget(key, i)
    if not v or #v ~= 9 + 8 * n then
        return nil
    end
    local c = {sunpack(L.fmt, v)}
    local cur = c[2]
    if c[1] ~= 7 or not int_in(cur, 0, P52) or cur * s > P52 then
        return nil
    end
    for x = 3, n + 2 do
        local y = c[x]
        if not (y >= 0 and y <= L.limit and y % 1 == 0) then
            return nil
        end
    end
    return c
end

-- The sliding log's REFUND: its newest units go, when the newest is
-- still in the window.
local function refund_log(key, L, now, hits)
    flush(key)
    local top = rpcall('ZRANGE', key, -1, -1, 'WITHSCORES')
    if top.err ~= nil or not top[1] then
        return 0
    end
    local sc = tonumber(top[2])
    if #top[1] ~= 8 or not int_in(sc, 0, P52) or not int_in(sunpack('>d', top[1]), 1, P52) then
        return 0
    end
    local t = sc > now and sc or now
    if sc <= t - L.window then
        return 0
    end
    rcall('ZPOPMAX', key, hits < L.limit and hits or L.limit)
    zchanged(key)
    return 1
end

-- weir_refund(): give back `hits` that a TAKE under L charged. The state
-- keeps its TTL (a refund never makes a key live longer); it finds
-- nothing to give back when the key is at rest or the state has moved on
-- (a window over, another algorithm's state, a key gone). Returns 1 when
-- it gave something back, else 0; and true when the key had no TTL (made
-- persistent by hand): the caller gives it its state's rest time.
local function refund(key, L, now, hits, i)
    local algo = L.algo
    if L.ban or hits == 0 then
        return 0
    elseif algo == 6 then
        return refund_log(key, L, now, hits)
    end
    local v -- the new state
    if algo == 5 then -- the count of the state's window, if not over
        local w, count = fixed_state(key, L, i)
        if idiv(now, L.window) > w or count == 0 then
            return 0
        end
        v = spack('<Bdd', 5, w, count > hits and count - hits or 0)
    elseif algo == 2 then -- the TAT back by hits emission intervals
        local x, t = gcra_state(key, L, i)
        if x < now or x == now and t == 0 then
            return 0
        end
        local m = L.m
        local back = hits * L.tunit -- past 2^53: far past the TAT
        local q = idiv(back, m)
        x, t = x - q, t - (back - q * m)
        if t < 0 then
            x, t = x - 1, t + m
        end
        if x < now then -- not before now
            x, t = now, 0
        end
        v = spack('<Bdd', 2, x, t * L.d)
    elseif algo == 7 then -- the newest sub-window's count, if it counts
        local c = counter_state(key, L, i)
        if not c then
            return 0
        end
        local n, cur = L.k + 1, c[2]
        local j = idiv(now, L.span)
        if j < cur then
            j = cur
        end
        local at = 3 + cur - idiv(cur, n) * n
        if c[at] == 0 or cur < j - L.k then
            return 0
        end
        c[at] = c[at] > hits and c[at] - hits or 0
        v = spack(L.fmt, unpack(c, 1, n + 2))
    else -- the buckets: the stored level down by hits, its time kept
        local l, last, level = bucket_state(key, L, now, i)
        if level == 0 then
            return 0
        end
        local back = hits * L.unit
        v = spack('<Bdd', algo, l > back and l - back or 0, last)
    end
    local ttl = ttl_of(key)
    sset(key, v, ttl or 1)
    return 1, not ttl
end

-- weir_charge(): charge `hits` (> 0) whatever the verdict, as far as the
-- state holds; what it cannot hold is not kept.
local function charge(key, L, now, hits, i)
    local algo = L.algo
    if algo == 2 then -- the TAT up to now + the tolerance
        local m, cap = L.m, L.tcap
        local x, t = gcra_state(key, L, i)
        local backlog = 0
        if x >= now then
            if (x - now) * m > cap then
                return -- already past it (a clock that went back)
            end
            backlog = (x - now) * m + t
        end
        if backlog >= cap then
            return
        end
        local need = hits * L.tunit
        backlog = backlog + (need < cap - backlog and need or cap - backlog)
        local q = m == 1 and backlog or idiv(backlog, m)
        sset(key, spack('<Bdd', 2, now + q, (backlog - q * m) * L.d),
            m == 1 and backlog or cdiv(backlog, m))
    elseif algo <= 4 then -- the buckets: the level up to the capacity
        local _, _, level, t = bucket_state(key, L, now, i)
        local need, room = hits * L.unit, L.cap - level
        local after = level + (need < room and need or room)
        sset(key, spack('<Bdd', algo, after, t), drain_time(after, L.rate) + t - now)
    else -- a window: a TAKE of as much as it can still take
        local f, at = L.f, nout
        f(key, L, now, 0, false, i)
        local take = reply[at + 2]
        nout = at
        if hits < take then
            take = hits
        end
        if take > 0 then
            f(key, L, now, take, true, i)
            nout = at
        end
    end
end

-- An op of an independent batch: decided and charged on its own.
local function run_one(i, a, now)
    local kind, L = Argv[a], Lims[Argv[a + 3]] or lim_of(a)
    if kind == '0' or kind == '1' then
        local hits, f = Argv[a + 1], L.f
        hits = NUMS[hits] or num(hits)
        if f and not L.ban then
            if kind == '0' and Argv[a + 2] ~= '0' then
                take_reserve(f, Keys[i], L, now, hits, reserve_of(a), true, i)
            else
                f(Keys[i], L, now, hits, kind == '0', i)
            end
        else
            decide(i, L, now, hits, false)
        end
    elseif kind == '3' then
        emit(OK, reset(Keys[i]), 0, 0, 0, 0, 0, 0)
    elseif (kind == '4' or kind == '5') and L.f then
        local key, hits = Keys[i], tonumber(Argv[a + 1])
        if L.algo == 8 or L.warm > 0 then
            emit(EALGO) -- a lease goes back by RELEASE; a warm-up's cost is not undone
        elseif kind == '4' then
            local had, untimed = refund(key, L, now, hits, i)
            local at = nout
            settled(key, L, now, had, i)
            if untimed then -- at rest when its state is (reply[at + 3])
                sset(key, wv[slot[key]], reply[at + 3] > 0 and reply[at + 3] or 1)
            end
        else
            if hits > 0 and not L.ban then
                charge(key, L, now, hits, i)
            end
            settled(key, L, now, 1, i)
        end
    elseif kind ~= '2' or not L.f then
        emit(EINVAL)
    elseif L.algo ~= 8 then
        emit(EALGO)
    elseif L.ban then
        emit(ENOLEASE)
    else
        emit(release(Keys[i], L, now, tonumber(Argv[a + 2])))
    end
end

-- An atomic batch of n ops from op i0 (arguments from Argv[a0]), as the
-- memory store runs one: every op decided first, a key's TAKEs with the
-- hits of its earlier TAKEs; all the TAKEs charged in order if all admit,
-- else none (those that would have admitted report a look with no hits).
-- A RELEASE, or an op the memory store would refuse, fails the whole
-- batch with nothing charged.
local function run_atomic(i0, a0, n, now)
    -- a key with more than one op (for a big batch, maybe)
    local shared = n > 8
    for i = i0 + 1, shared and 0 or i0 + n - 1 do
        local key = Keys[i]
        for ii = i0, i - 1 do
            if Keys[ii] == key then
                shared = true
            end
        end
    end
    local sums = shared and {} or nil -- the hits of a key's TAKEs so far
    -- The first pass. When every key is its op's alone, it decides the
    -- batch: a string state's charge is made as it is decided, and undone
    -- if a TAKE is denied. Else (a denial, a shared key, a sorted set to
    -- charge) the batch is decided again below, from the same state.
    local out0, again, denied = nout, shared, false
    planning, nw0, nundo = true, nw, 0
    for j = 0, n - 1 do
        local i, a = i0 + j, a0 + 4 * j
        local kind, L = Argv[a], Lims[Argv[a + 3]] or lim_of(a)
        local take, f = kind == '0', L.f
        if not take and kind ~= '1' or not f then
            planning = false
            unplan()
            nout = out0
            for _ = 1, n do
                emit(EINVAL)
            end
            return
        end
        local hits = Argv[a + 1]
        hits = NUMS[hits] or num(hits)
        if sums and take then
            local key = Keys[i]
            local before = sums[key]
            if before then
                hits = hits + before
            end
            sums[key] = hits
        end
        local plan = take and not shared and L.string
        if take and not plan then
            again = true
        end
        -- a TAKE's reserve stays free after its key's TAKEs so far and its own
        local reserve = take and reserve_of(a) or 0
        if L.ban then
            emit(OK, 0, 0, 0, 0, -1, 0, 0) -- weir__ban_result()
            denied = denied or take
        elseif reserve > 0 then
            if take_reserve(f, Keys[i], L, now, hits, reserve, plan, i) == 0 then
                denied = true
            end
        elseif f(Keys[i], L, now, hits, plan, i) == 0 and take then
            denied = true
        end
    end
    planning = false
    if not again and not denied then
        return
    end
    unplan()
    nout = out0
    if denied then
        -- nothing charged: each op as the first pass decided it, the TAKEs
        -- that would have admitted as a look with no hits
        sums = shared and {} or nil
        for j = 0, n - 1 do
            local i, a = i0 + j, a0 + 4 * j
            local take, L = Argv[a] == '0', Lims[Argv[a + 3]]
            local hits = tonumber(Argv[a + 1])
            if sums and take then
                local key = Keys[i]
                hits = hits + (sums[key] or 0)
                sums[key] = hits
            end
            local at = nout
            local st, al = decide(i, L, now, hits, false, take and reserve_of(a) or 0)
            if st == OK and take and al == 1 then
                nout = at
                decide(i, L, now, 0, false)
            end
        end
    else
        -- every TAKE admits: each op decided again in order, charged
        for j = 0, n - 1 do
            local i, a = i0 + j, a0 + 4 * j
            local take = Argv[a] == '0'
            decide(i, Lims[Argv[a + 3]], now, tonumber(Argv[a + 1]), take,
                take and reserve_of(a) or 0)
        end
    end
end

local MGET_CHUNK = 1000 -- keys per MGET (a Lua call takes at most 8000 arguments)

local function main(keys, argv)
    if not floor then
        bind()
    end
    rcall, rpcall = redis.call, redis.pcall
    -- format 3 (a cluster node): the keys among the arguments, read one
    -- by one before anything is written
    local b, local_keys = 0, false
    if argv[1] == '3' then
        local nk = tonumber(argv[2])
        keys, b, local_keys = {unpack(argv, 3, 2 + nk)}, 1 + nk, true
    elseif argv[1] ~= '2' then
        return redis.error_reply('weir: unknown wire format ' .. tostring(argv[1]))
    end
    Keys, Argv = keys, argv
    -- the limit table
    local nl = argv[2 + b]
    nl = NUMS[nl] or num(nl)
    local strings = false
    Lims = {}
    for l = 1, nl do
        local L = lim(argv[2 + b + l])
        if not L then
            return redis.error_reply('weir: not a limit: ' .. tostring(argv[2 + b + l]))
        end
        local k = IDX[l]
        if not k then
            k = tostring(l)
            IDX[l] = k
        end
        Lims[k] = L
        strings = strings or L.string
    end
    slot, expire, nw, nout = {}, nil, 0, 1
    -- every op's string state at once
    local nk = #keys
    if local_keys then
        -- keys of several slots: one MGET each (a sorted set's reads nil),
        -- which fails the call here, before any write, for a key this
        -- node does not serve
        fetched = {}
        for k = 1, nk do
            fetched[k] = rcall('MGET', keys[k])[1]
        end
    elseif not strings then
        fetched = {}
    elseif nk <= MGET_CHUNK then
        fetched = rcall('MGET', unpack(keys))
    else
        fetched = {}
        for k0 = 1, nk, MGET_CHUNK do
            local k1 = k0 + MGET_CHUNK - 1
            if k1 > nk then
                k1 = nk
            end
            local vs = rcall('MGET', unpack(keys, k0, k1))
            for k = k0, k1 do
                fetched[k] = vs[k - k0 + 1]
            end
        end
    end
    local clock = nil
    local a, i = 4 + b + nl, 1
    local m = argv[a - 1]
    for _ = 1, NUMS[m] or num(m) do
        local now = argv[a]
        if now == '-' then
            if not clock then
                local t = rcall('TIME')
                clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
            end
            now = clock
        else
            now = tonumber(now)
        end
        local atomic, n = argv[a + 1] == '1', argv[a + 2]
        n = NUMS[n] or num(n)
        a = a + 3
        if atomic then
            run_atomic(i, a, n, now)
        else
            for j = 0, n - 1 do
                run_one(i + j, a + 4 * j, now)
            end
        end
        a, i = a + 4 * n, i + n
    end
    for k = 1, nw do
        local key = wk[k]
        if key then
            rcall('PSETEX', key, wt[k], wv[k])
        end
    end
    if expire then
        for key, reset in pairs(expire) do
            local k = slot[key]
            if k == STALE or not wk[k] then -- else a string replaced the set
                rcall('PEXPIRE', key, reset > 1000 and ttl_ms(reset) or '2')
            end
        end
    end
    reply[1], reply[nout + 1] = clock or 0, nil -- where Redis stops reading
    local r = reply
    if nout > 8192 or nw > 1024 then -- not kept: so big a call is rare
        reply, wv, wt, wk, undo = {}, {}, {}, {}, {}
    end
    return r
end

if redis.register_function then
    -- FUNCTION LOAD: once. A cluster node's call (format 3) touches keys
    -- of several slots, all its own; a script run by EVAL may as it is.
    redis.register_function {
        function_name = 'weir_v2',
        callback = main,
        flags = {'allow-cross-slot-keys'},
    }
else
    return main(KEYS, ARGV) -- EVAL, EVALSHA: every call
end
