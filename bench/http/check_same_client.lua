-- wrk: GET /v1/check with the client work of lease_pairs.lua (a request()
-- and a response() in Lua for every request), so that bench/leases.sh
-- compares what weir does, not what wrk's Lua does.
local tokens = {}

function request()
    local t = table.remove(tokens)
    return wrk.format("GET", "/v1/check?domain=bench&key=k1")
end

function response(status, headers, body)
    local t = headers["Weir-Lease"]
    if t then
        tokens[#tokens + 1] = t
    end
end
