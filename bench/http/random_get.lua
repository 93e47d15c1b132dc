-- GET auth form with one of KEYS random keys (or a fixed key when KEYS=1).
-- PATH_PREFIX is the path and query up to the key's value. Every distinct
-- request is formatted once per wrk thread before the run (see
-- random_post.lua).
local keys = tonumber(os.getenv("KEYS") or "1")
local prefix = os.getenv("PATH_PREFIX")
local pace = tonumber(os.getenv("PACE_MS") or "0")
local reqs = {}
math.randomseed(os.time())

init = function(args)
    for k = 1, keys do
        reqs[k] = wrk.format("GET", prefix .. "k" .. k)
    end
end

request = function()
    return reqs[keys > 1 and math.random(keys) or 1]
end

if pace > 0 then
    delay = function() return pace end
end
