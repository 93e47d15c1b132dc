-- POST /v1/check with three descriptors (user, path, ip), each with one of
-- KEYS random values (or fixed values when KEYS=1). Every distinct request
-- is formatted once per wrk thread before the run, so that sending one
-- costs wrk a table lookup, not string building: wrk shares the machine's
-- cores with the server it measures.
local keys = tonumber(os.getenv("KEYS") or "1")
local pace = tonumber(os.getenv("PACE_MS") or "0")
local headers = {["Content-Type"] = "application/json"}
local reqs = {}
math.randomseed(os.time())

local function body(k)
    return '{"domain":"bench","descriptors":[' ..
        '{"entries":[{"key":"user","value":"u' .. k .. '"}]},' ..
        '{"entries":[{"key":"path","value":"/p' .. (k % 100) .. '"}]},' ..
        '{"entries":[{"key":"ip","value":"10.0.' .. (k % 256) .. '.' .. (k % 251) .. '"}]}]}'
end

init = function(args)
    for k = 1, keys do
        reqs[k] = wrk.format("POST", "/v1/check", headers, body(k))
    end
end

request = function()
    return reqs[keys > 1 and math.random(keys) or 1]
end

if pace > 0 then
    delay = function() return pace end
end
