-- POST /v1/check with three descriptors (user, path, ip), each with one of
-- KEYS random values (or fixed values when KEYS=1).
local keys = tonumber(os.getenv("KEYS") or "1")
local pace = tonumber(os.getenv("PACE_MS") or "0")
local headers = {["Content-Type"] = "application/json"}
math.randomseed(os.time())

request = function()
    local k = keys > 1 and math.random(keys) or 1
    local body = '{"domain":"bench","descriptors":[' ..
        '{"entries":[{"key":"user","value":"u' .. k .. '"}]},' ..
        '{"entries":[{"key":"path","value":"/p' .. (k % 100) .. '"}]},' ..
        '{"entries":[{"key":"ip","value":"10.0.' .. (k % 256) .. '.' .. (k % 251) .. '"}]}]}'
    return wrk.format("POST", "/v1/check", headers, body)
end

if pace > 0 then
    delay = function() return pace end
end
