-- Decisions of tenants: api_key=tN, N uniform over 0..KEYS-1 (bench/quotas.sh).
-- FORM is one of
--   get    GET /v1/check?domain=D&api_key=tN             [api_key]
--   post1  POST /v1/check, the same descriptor            [api_key]
--   post2  POST /v1/check, two descriptors                [api_key],[api_key,endpoint=/orders]
-- DOMAIN is the domain (api). Every distinct request is formatted once per
-- wrk thread before the run (see random_post.lua).
local keys = tonumber(os.getenv("KEYS") or "100000")
local form = os.getenv("FORM") or "get"
local domain = os.getenv("DOMAIN") or "api"
local headers = {["Content-Type"] = "application/json"}
local reqs = {}
math.randomseed(os.time())

local function body(key)
    local d = '{"entries":[{"key":"api_key","value":"' .. key .. '"}]}'
    if form == "post2" then
        d = d .. ',{"entries":[{"key":"api_key","value":"' .. key .. '"},' ..
            '{"key":"endpoint","value":"/orders"}]}'
    end
    return '{"domain":"' .. domain .. '","descriptors":[' .. d .. ']}'
end

init = function(args)
    for k = 1, keys do
        local key = "t" .. (k - 1)
        if form == "get" then
            reqs[k] = wrk.format("GET", "/v1/check?domain=" .. domain .. "&api_key=" .. key)
        else
            reqs[k] = wrk.format("POST", "/v1/check", headers, body(key))
        end
    end
end

request = function()
    return reqs[math.random(keys)]
end

