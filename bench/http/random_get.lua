-- GET auth form with one of KEYS random keys (or a fixed key when KEYS=1).
-- PATH_PREFIX is the path and query up to the key's value.
local keys = tonumber(os.getenv("KEYS") or "1")
local prefix = os.getenv("PATH_PREFIX")
local pace = tonumber(os.getenv("PACE_MS") or "0")
math.randomseed(os.time())

request = function()
    local k = keys > 1 and math.random(keys) or 1
    return wrk.format("GET", prefix .. "k" .. k)
end

if pace > 0 then
    delay = function() return pace end
end
