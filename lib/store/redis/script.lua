--[[
script.lua - weir's Redis script, wire format 1 (lib/store/redis/codec.h).

Runs every algorithm of weir/algo.h on state kept in Redis and decides
exactly as the C step functions (lib/algo/*.c) decide on their own state,
for every limit weir__redis_limit_fits() accepts; an atomic batch runs as
the memory store's run_atomic() does (lib/store/memstore.c).

Keys: one per op. Arguments: 1 (the format), m, then per batch "now flags
n" and 11 per op: kind hits lease algorithm limit window_us burst
sub_windows unit rate capacity. Reply: Redis's TIME in microseconds when a
batch's now was "-" (else 0), then 8 integers per op: status allowed limit
remaining reset_after retry_after delay lease.

Two ways to run it: as a script (EVAL, EVALSHA), or, on Redis 7, loaded
once as a function library ("#!lua name=<library>" and this text, FUNCTION
LOAD) and called as FCALL weir_v1, with the same arguments after the name.
A script sets up its helpers again at every call; a library does it once.

State, one key per op (times in integer microseconds):
  token_bucket, leaky_bucket, leaky_bucket_shaper (1, 3, 4)
      a string, struct "<Bdd": the algorithm, the level (in 1/unit of a
      request), the time of the last charge.
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
A state that is not this algorithm's or not valid for the limit is a fresh
key, replaced when the op charges. After a charge the key expires when it is
back at rest: reset_after rounded up to a millisecond (a sorted set's
from the end of the call, and 2 ms at least: see `expire`); a release
leaves the expiry the last acquire set, so the lease ids live as long as a
lease.

Exactness: Lua numbers are doubles, so every quantity held stays below 2^53
(times are below 2^52; weir__redis_limit_fits() bounds the limits). Every
division goes through idiv()/cdiv(), which correct the rounded quotient;
products that may pass 2^53 (the sliding counter's count x sub-window) go
through muldiv(), which compares exact products of 24-bit limbs. GCRA's
TAT, nanoseconds in C, is kept as microseconds and the nanoseconds past
them, and decided in ticks of d = gcd(unit, 1000) ns counted from now, so
the numbers held are bounded by the capacity in ticks.
]]

-- Lua's own functions, bound at the first call (a library being loaded
-- sees no globals but `redis`).
local tonumber, type, floor, unpack, pairs, tostring
local spack, sunpack, ssub, srep, sfmt

local function bind()
    local G = _G
    tonumber, type, floor, unpack = G.tonumber, G.type, G.math.floor, G.unpack
    pairs, tostring = G.pairs, G.tostring
    spack, sunpack = G.struct.pack, G.struct.unpack
    ssub, srep, sfmt = G.string.sub, G.string.rep, G.string.format
end

local OK, EINVAL, ENOLEASE, EALGO = 0, -1, -4, -9
local P51, P52, P53 = 2251799813685248, 4503599627370496, 9007199254740992
-- concurrency: "#" scores start here, above any expiry (2^52 + 100 years)
local SEQ = 8000000000000000
local SHAPER = 4
local CHUNK = 500 -- members per ZADD (a Lua call takes at most 8000 arguments)

---------------------------------------------------------------- arithmetic

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1. The rounded quotient is
-- at most one above the floor, and then q*b = a + 1 is exact.
local function idiv(a, b)
    local q = floor(a / b)
    if q * b > a then
        return q - 1
    end
    return q
end

-- ceil(a / b), same domain
local function cdiv(a, b)
    local q = floor(a / b)
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
    return x >= lo and x <= hi and x == floor(x)
end

---------------------------------------------------------------- state

-- The call's: its keys and arguments, redis.call and redis.pcall (which a
-- library has only while it runs), its reply.
local Keys, Argv, rcall, rpcall, out

-- String states, read once per call: later ops on the key (an atomic
-- batch's charge after its check, the same key twice) reuse what was read
-- or written. A key of another type, or none, reads as false.
local cache

local function sget(key)
    local v = cache[key]
    if v == nil then
        v = rpcall('GET', key)
        if type(v) ~= 'string' then
            v = false
        end
        cache[key] = v
    end
    return v
end

-- Sorted sets written by this call, and when they are back at rest
-- (microseconds from their op's now): one PEXPIRE each, at the end of the
-- call, of at least 2 ms. (Redis 7.0's PEXPIRE deletes the key at once
-- when its expiry is not past the current millisecond, which a 1 ms TTL
-- is if the clock ticks during the command; PSETEX never deletes.)
local expire

-- A TTL in milliseconds. Redis turns a number argument into text with an
-- exponent past 7 trailing zeros (7.2's shortest form), which it does not
-- take for an integer: from 10^8 ms on, the number goes as text.
local function ttl_ms(reset_us)
    local ms = cdiv(reset_us, 1000)
    return ms < 100000000 and ms or sfmt('%d', ms)
end

-- An atomic batch's first pass decides its TAKEs with `write` set when a
-- TAKE is its key's only op and the state is a string: the write is kept
-- here, and made by the second pass if every TAKE admits (the decision is
-- the charge's already). Keyed by key, as such a key is the op's alone.
local planning, planned, planned_ttl

local function sset(key, v, reset_us)
    if planning then
        planned[key], planned_ttl[key] = v, ttl_ms(reset_us)
        return
    end
    rcall('PSETEX', key, ttl_ms(reset_us), v)
    cache[key] = v
    expire[key] = nil
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
-- (write = false) of cost `hits` at `now`, for the op whose arguments start
-- at Argv[a], and returns status, allowed (0/1), limit, remaining,
-- reset_after, retry_after, delay, lease. The limit is not a ban.

local function drain_time(units, rate)
    if rate == 1 then
        return units
    end
    return cdiv(units, rate)
end

-- bucket.c: the token bucket, the leaky bucket policer and shaper
local function bucket(key, algo, a, now, hits, write)
    local burst, unit = tonumber(Argv[a + 6]), tonumber(Argv[a + 8])
    local rate, cap = tonumber(Argv[a + 9]), tonumber(Argv[a + 10])
    local level, last = 0, 0
    local v = sget(key)
    if v and #v == 17 then
        local tag, l, t = sunpack('<Bdd', v)
        if tag == algo and l >= 0 and l <= cap and l == floor(l) and t >= 0 and t <= P52 and
            t == floor(t) then
            level, last = l, t
        end
    end
    -- a clock that went backwards drains nothing
    local t = last > now and last or now
    local drained = (t - last) * rate -- if it rounds, it is far above the level
    if drained >= level then
        level = 0
    else
        level = level - drained
    end
    local back = t - now
    local need = (hits > 0 and hits or 1) * unit
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
    else
        retry = drain_time(level - (cap - need), rate) + back
    end
    local reset = 0
    if after > 0 then
        reset = drain_time(after, rate) + back
    end
    if write and allowed == 1 and hits > 0 then
        sset(key, spack('<Bdd', algo, after, t), reset)
    end
    return OK, allowed, burst, idiv(cap - after, unit), reset, retry, delay, 0
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
local function gcra(key, algo, a, now, hits, write)
    local burst = tonumber(Argv[a + 6])
    local u_us, u_ns = split3(Argv[a + 8])
    local c_us, c_ns = split3(Argv[a + 10])
    local d, r = 1000, u_ns
    while r > 0 do
        d, r = r, d % r
    end
    local m = 1000 / d
    local unit, cap = u_us * m + u_ns / d, c_us * m + c_ns / d
    -- the TAT: whole microseconds, and ticks past them
    local tat_us, tat_t = 0, 0
    local v = sget(key)
    if v and #v == 17 then
        local tag, x, y = sunpack('<Bdd', v)
        if tag == 2 and int_in(x, 0, P52 + P51) and int_in(y, 0, 999) then
            -- between two ticks only if the limit changed: round it up
            tat_us, tat_t = x, cdiv(y, d)
            if tat_t == m then
                tat_us, tat_t = x + 1, 0
            end
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
        reset = cdiv(backlog, m)
        if backlog < cap then
            remaining = idiv(cap - backlog, unit)
        end
    end
    if write and allowed == 1 and hits > 0 then
        local q = idiv(backlog, m)
        sset(key, spack('<Bdd', 2, now + q, (backlog - q * m) * d), reset)
    end
    return OK, allowed, burst, remaining, reset, retry, 0, 0
end

-- fixed_window.c
local function fixed(key, algo, a, now, hits, write)
    local limit, window = tonumber(Argv[a + 4]), tonumber(Argv[a + 5])
    local w, count = 0, 0
    local v = sget(key)
    if v and #v == 17 then
        local tag, x, y = sunpack('<Bdd', v)
        if tag == 5 and x >= 0 and x * window <= P52 and x == floor(x) and y >= 0 and
            y <= limit and y == floor(y) then
            w, count = x, y
        end
    end
    -- an earlier window than the state's (the clock went back) is the state's
    local cw = idiv(now, window)
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
    return OK, allowed, limit, limit - count, count > 0 and fin - now or 0, retry, 0, 0
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
local function counter(key, algo, a, now, hits, write)
    local limit, window, k = tonumber(Argv[a + 4]), tonumber(Argv[a + 5]), tonumber(Argv[a + 7])
    local s, n = window / k, k + 1 -- k divides the window
    local fmt = k == 1 and '<Bddd' or '<Bd' .. srep('d', n)
    local c, cur = nil, 0
    local v = sget(key)
    if v and #v == 9 + 8 * n then
        c = {sunpack(fmt, v)}
        cur = c[2]
        if c[1] ~= 7 or not int_in(cur, 0, P52) or cur * s > P52 then
            c = nil
        else
            for i = 3, n + 2 do
                if not int_in(c[i], 0, limit) then
                    c = nil
                    break
                end
            end
        end
        if not c then
            cur = 0
        end
    end
    -- a time before the state's sub-window is its start
    local j = idiv(now, s)
    local e = now - j * s
    if j < cur then
        j, e = cur, 0
    end
    local full = 0
    for i = j - k + 1, j do
        full = full + count_at(c, cur, n, i)
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
        local from = cur + 1
        if j - n + 1 > from then
            from = j - n + 1
        end
        for i = from, j do
            c[3 + i - idiv(i, n) * n] = 0
        end
        local slot = 3 + j - idiv(j, n) * n
        c[slot] = c[slot] + hits
        sset(key, spack(fmt, 7, j, unpack(c, 3, n + 2)), reset)
    end
    return OK, allowed, limit, remaining, reset, retry, 0, 0
end

-- sliding_log.c
local function slog(key, algo, a, now, hits, write)
    local limit, window = tonumber(Argv[a + 4]), tonumber(Argv[a + 5])
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
        expire[key] = reset
        cache[key] = nil
    end
    return OK, allowed, limit, limit - after, reset, retry, 0, 0
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

local function conc(key, algo, a, now, hits, write)
    local limit, window = tonumber(Argv[a + 4]), tonumber(Argv[a + 5])
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
            expire[key] = exp - now
            cache[key] = nil
            held = held + hits
            return OK, 1, limit, limit - held, exp - now, 0, 0, seq
        end
        -- a check reports the state as if the lease had been taken
        local reset = last > now and last - now or 0
        if reset < window then
            reset = window
        end
        return OK, 1, limit, limit - held - hits, reset, 0, 0, 0
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
    return OK, allowed, limit, held >= limit and 0 or limit - held, last > now and last - now or 0,
        retry, 0, 0
end

-- weir_release(): reap the expired leases, then give lease `id` back
local function release(key, a, now, id)
    local limit = tonumber(Argv[a + 4])
    if type(rpcall('ZREMRANGEBYSCORE', key, 0, now)) ~= 'number' then
        return ENOLEASE, 0, 0, 0, 0, 0, 0, 0
    end
    local exp = rcall('ZSCORE', key, spack('>dd', id, 0))
    if not exp then
        return ENOLEASE, 0, 0, 0, 0, 0, 0, 0
    end
    cache[key] = nil
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

---------------------------------------------------------------- batches

local FAMILY = {['1'] = bucket, ['2'] = gcra, ['3'] = bucket, ['4'] = bucket, ['5'] = fixed,
                ['6'] = slog, ['7'] = counter, ['8'] = conc}
local NUM = {['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 5, ['6'] = 6, ['7'] = 7,
             ['8'] = 8}
-- the algorithms whose state is a string (sget/sset)
local STRING = {['1'] = true, ['2'] = true, ['3'] = true, ['4'] = true, ['5'] = true,
                ['7'] = true}

-- Decide op i (its arguments from Argv[a]) with `hits`, charging it when
-- `write`, and put its result in the reply. Returns its status and allowed.
local function decide(i, a, now, hits, write)
    local algo = Argv[a + 3]
    local f = FAMILY[algo]
    local p = i * 8 - 6 -- out[1] is the time
    local st, al, li, re, rs, rt, de, le
    if not f then
        st, al, li, re, rs, rt, de, le = EINVAL, 0, 0, 0, 0, 0, 0, 0
    elseif Argv[a + 4] == '0' then -- a ban: weir__ban_result()
        st, al, li, re, rs, rt, de, le = OK, 0, 0, 0, 0, -1, 0, 0
    else
        st, al, li, re, rs, rt, de, le = f(Keys[i], NUM[algo], a, now, hits, write)
    end
    out[p], out[p + 1], out[p + 2], out[p + 3] = st, al, li, re
    out[p + 4], out[p + 5], out[p + 6], out[p + 7] = rs, rt, de, le
    return st, al
end

local function fail(i, st)
    local p = i * 8 - 6
    out[p], out[p + 1], out[p + 2], out[p + 3] = st, 0, 0, 0
    out[p + 4], out[p + 5], out[p + 6], out[p + 7] = 0, 0, 0, 0
end

-- An op of an independent batch: decided and charged on its own.
local function run_one(i, a, now)
    local kind = Argv[a]
    if kind == '0' or kind == '1' then
        decide(i, a, now, tonumber(Argv[a + 1]), kind == '0')
    elseif kind ~= '2' or not FAMILY[Argv[a + 3]] then
        fail(i, EINVAL)
    elseif Argv[a + 3] ~= '8' then
        fail(i, EALGO)
    elseif Argv[a + 4] == '0' then
        fail(i, ENOLEASE)
    else
        local p = i * 8 - 6
        out[p], out[p + 1], out[p + 2], out[p + 3], out[p + 4], out[p + 5], out[p + 6], out[p + 7] =
            release(Keys[i], a, now, tonumber(Argv[a + 2]))
    end
end

-- An atomic batch of n ops from op i0 (arguments from Argv[a0]): every op
-- decided first, a key's TAKEs with the hits of its earlier TAKEs; all the
-- TAKEs charged in order if all admit, else none (those that would have
-- admitted report a look with no hits). A RELEASE, or an op the memory
-- store would refuse, fails the whole batch with nothing charged.
local function run_atomic(i0, a0, n, now)
    local ops = n > 1 and {} or nil -- ops per key
    for j = 0, n - 1 do
        local kind = Argv[a0 + 11 * j]
        if kind ~= '0' and kind ~= '1' or not FAMILY[Argv[a0 + 11 * j + 3]] then
            for jj = 0, n - 1 do
                fail(i0 + jj, EINVAL)
            end
            return
        end
        if ops then
            local key = Keys[i0 + j]
            ops[key] = (ops[key] or 0) + 1
        end
    end
    local sums = ops and {} -- the hits of a key's TAKEs so far
    local denied = false
    if not planned then
        planned, planned_ttl = {}, {}
    end
    planning = true
    for j = 0, n - 1 do
        local i, a = i0 + j, a0 + 11 * j
        local key, take = Keys[i], Argv[a] == '0'
        local hits = tonumber(Argv[a + 1])
        if sums and take then
            local before = sums[key]
            if before then
                hits = hits + before
            end
            sums[key] = hits
        end
        local plan = take and (not ops or ops[key] == 1) and STRING[Argv[a + 3]] or false
        local st, al = decide(i, a, now, hits, plan)
        if st == OK and take and al == 0 then
            denied = true
        end
    end
    planning = false
    -- The second pass: an op alone on its key has its result already (a
    -- string state's charge was planned: write it, or forget it); the
    -- others are decided again, in order, as they are charged.
    for j = 0, n - 1 do
        local i, a = i0 + j, a0 + 11 * j
        local key, take = Keys[i], Argv[a] == '0'
        local alone = not ops or ops[key] == 1
        if take and alone and STRING[Argv[a + 3]] then
            local v = planned[key]
            if v then
                if not denied then
                    rcall('PSETEX', key, planned_ttl[key], v)
                    cache[key], expire[key] = v, nil
                end
                planned[key] = nil
            end
        elseif not denied and (take or not alone) then
            decide(i, a, now, tonumber(Argv[a + 1]), take)
        end
        if denied and take and out[i * 8 - 6] == OK and out[i * 8 - 5] == 1 then
            decide(i, a, now, 0, false)
        end
    end
end

local function main(keys, argv)
    if not floor then
        bind()
    end
    Keys, Argv, rcall, rpcall = keys, argv, redis.call, redis.pcall
    out, cache, expire = {0}, {}, {}
    planning, planned, planned_ttl = false, nil, nil
    if argv[1] ~= '1' then
        return redis.error_reply('weir: unknown wire format ' .. tostring(argv[1]))
    end
    local clock = nil
    local a, i = 3, 1
    for _ = 1, tonumber(argv[2]) do
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
        local atomic, n = argv[a + 1] == '1', tonumber(argv[a + 2])
        a = a + 3
        if atomic then
            run_atomic(i, a, n, now)
        else
            for j = 0, n - 1 do
                run_one(i + j, a + 11 * j, now)
            end
        end
        a, i = a + 11 * n, i + n
    end
    for key, reset in pairs(expire) do
        rcall('PEXPIRE', key, reset > 1000 and ttl_ms(reset) or '2')
    end
    out[1] = clock or 0
    return out
end

if redis.register_function then
    redis.register_function('weir_v1', main) -- FUNCTION LOAD: once
else
    return main(KEYS, ARGV) -- EVAL, EVALSHA: every call
end
