-- bench/redis/token_bucket.lua - the rate limiter users write without
-- weir, as the baseline of bench/redis.sh: one token bucket per key in a
-- hash (tokens, last refill), one EVALSHA per descriptor.
--
-- KEYS[1] the bucket; ARGV: rate (tokens per second), capacity, now (ms),
-- cost. Returns {allowed, tokens left}.
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate / 1000)
local allowed = 0
if tokens >= cost then
    tokens = tokens - cost
    allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000))
return {allowed, math.floor(tokens)}
