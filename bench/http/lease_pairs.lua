-- wrk: concurrency leases taken and given back, in pairs (bench/leases.sh).
-- Each thread alternates GET /v1/acquire with POST /v1/release of a token
-- an acquire handed out (any connection may give back any token), so a
-- finished pair is two requests. The acquire's limit is far above the
-- load: every one is admitted and holds a lease until it is given back.
local tokens = {}

function request()
    local t = table.remove(tokens)
    if t then
        return wrk.format("POST", "/v1/release", {["Weir-Lease"] = t}, "")
    end
    return wrk.format("GET", "/v1/acquire?domain=bench&backend=b1")
end

function response(status, headers, body)
    local t = headers["Weir-Lease"]
    if t then
        tokens[#tokens + 1] = t
    end
end
