-- Written by rayvllm.fleet (router role): the front door's accounting, loaded by HAProxy (lua-load).
--
-- Per tenant ("-": a request with the clusters' key) and model: requests by status, tokens in and out, the time to
-- the response's headers; and each tenant's tokens of the last minute, for its tokens_per_minute limit. Served as
-- Prometheus metrics by the door's metrics frontend (docs/router.md#tenants). The counts live in HAProxy's process:
-- a reload (a changed model, tenant or setting) starts them at 0 again, which Prometheus's rate() reads as a reset.
--
-- Tokens come from the usage vLLM writes in each answer ("prompt_tokens", "completion_tokens"; in a stream, when
-- the client asks for it with stream_options.include_usage). A stream without usage counts one completion token per
-- streamed event (vLLM sends one per token) and no prompt tokens.

local BUCKETS = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300 }
local WINDOW_S = 60

local requests = {} -- "tenant\0model\0code" -> count
local tokens = {} -- "tenant\0model\0kind" -> count
local latency = {} -- tenant -> {count, sum, buckets = {...}}
local window = {} -- tenant -> {[second % 60] = {second, tokens}}

local function now_ms()
    local t = core.now()
    return t.sec * 1000 + t.usec // 1000
end

local function add(tbl, key, n)
    tbl[key] = (tbl[key] or 0) + n
end

-- The tenant's tokens of the last WINDOW_S seconds, and the seconds until they are under LIMIT.
local function used(tenant, limit)
    local slots, now = window[tenant], core.now().sec
    if not slots then
        return 0, 0
    end
    local total, by_age = 0, {}
    for _, slot in pairs(slots) do
        local age = now - slot[1]
        if age >= 0 and age < WINDOW_S then
            total = total + slot[2]
            by_age[age] = (by_age[age] or 0) + slot[2]
        end
    end
    local left, retry = total, 1
    for age = WINDOW_S - 1, 0, -1 do
        if left < limit then
            break
        end
        left = left - (by_age[age] or 0)
        retry = WINDOW_S - age
    end
    return total, retry
end

local function spend(tenant, n)
    local now = core.now().sec
    local slots = window[tenant]
    if not slots then
        slots = {}
        window[tenant] = slots
    end
    local slot = slots[now % WINDOW_S]
    if not slot or slot[1] ~= now then
        slot = { now, 0 }
        slots[now % WINDOW_S] = slot
    end
    slot[2] = slot[2] + n
end

local function labels(txn)
    local tenant = txn:get_var("txn.tenant") or "-"
    -- The model only when the door routes it (a served model): a client's unknown names would be labels without end.
    local model = "-"
    if txn:get_var("txn.backend") then
        model = txn:get_var("txn.model") or "-"
    end
    return tenant, model
end

-- http-request lua.door_begin: the request's start.
core.register_action("door_begin", { "http-req" }, function(txn)
    txn:set_var("txn.t0", now_ms())
end)

-- http-request lua.door_tokens_limit: whether the tenant is over its tokens per minute (txn.tpm, 0: no limit);
-- sets txn.tpm_over and txn.tpm_retry (seconds).
core.register_action("door_tokens_limit", { "http-req" }, function(txn)
    local tenant, limit = txn:get_var("txn.tenant"), tonumber(txn:get_var("txn.tpm") or 0) or 0
    if not tenant or limit <= 0 then
        return
    end
    local total, retry = used(tenant, limit)
    if total >= limit then
        txn:set_var("txn.tpm_over", 1)
        txn:set_var("txn.tpm_retry", retry)
    end
end)

-- One answer: counted once, when its headers pass (a router's), or by door_answer (the door's own).
local function account(txn, code)
    local tenant, model = labels(txn)
    add(requests, tenant .. "\0" .. model .. "\0" .. code, 1)
    local t0 = tonumber(txn:get_var("txn.t0") or 0) or 0
    local seconds = t0 > 0 and (now_ms() - t0) / 1000 or 0
    local h = latency[tenant]
    if not h then
        h = { count = 0, sum = 0, buckets = {} }
        latency[tenant] = h
    end
    h.count = h.count + 1
    h.sum = h.sum + seconds
    for i, le in ipairs(BUCKETS) do
        if seconds <= le then
            h.buckets[i] = (h.buckets[i] or 0) + 1
        end
    end
end

-- http-request lua.door_answer <status>: counts an answer of the door itself (400, 401, 403, 404, 413, 429), right
-- before the rule that returns it (HAProxy 2.6 runs no Lua after http-request return).
core.register_action("door_answer", { "http-req" }, function(txn, status)
    account(txn, tonumber(status) or 0)
end, 1)

-- The filter on the door's frontend: reads the usage in each answer as it streams through (nothing is held back).
local Usage = {}
Usage.id = "rayvllm door usage"
Usage.flags = filter.FLT_CFG_FL_HTX
Usage.__index = Usage

function Usage:new()
    return setmetatable({ tail = "", prompt = nil, completion = nil, events = 0 }, Usage)
end

function Usage:start_analyze(txn, chn)
    if chn:is_resp() then
        filter.register_data_filter(self, chn)
    end
    return filter.CONTINUE
end

-- The answer counted once: at its headers, or where the response ends without them (an error HAProxy writes).
function Usage:count(txn, chn)
    if chn:is_resp() and not self.counted then
        self.counted = true
        account(txn, txn.sf:status() or 0)
    end
    return filter.CONTINUE
end

function Usage:http_headers(txn, msg)
    return self:count(txn, msg.channel)
end

function Usage:end_analyze(txn, chn)
    return self:count(txn, chn)
end

function Usage:http_payload(txn, msg)
    local data = msg:body()
    if data and #data > 0 then
        -- The end of the last piece goes first: a number or a marker cut in two is read whole (the last value
        -- read wins, so reading one twice changes nothing; an event is counted where it ends, once).
        local s = self.tail .. data
        for n in s:gmatch('"prompt_tokens"%s*:%s*(%d+)') do
            self.prompt = tonumber(n)
        end
        for n in s:gmatch('"completion_tokens"%s*:%s*(%d+)') do
            self.completion = tonumber(n)
        end
        local init = 1
        while true do
            local first, last = s:find("data: {", init, true)
            if not first then
                break
            end
            if last > #self.tail then
                self.events = self.events + 1
            end
            init = last + 1
        end
        self.tail = s:sub(-64)
    end
    return msg:input()
end

function Usage:http_end(txn, msg)
    if msg.channel:is_resp() then
        local prompt, completion = self.prompt or 0, self.completion or self.events
        -- The audit line's tokens (its log-format writes 0 where they are not set).
        txn:set_var("txn.prompt_tokens", prompt)
        txn:set_var("txn.completion_tokens", completion)
        if prompt + completion > 0 then
            local tenant, model = labels(txn)
            add(tokens, tenant .. "\0" .. model .. "\0prompt", prompt)
            add(tokens, tenant .. "\0" .. model .. "\0completion", completion)
            if tenant ~= "-" then
                spend(tenant, prompt + completion)
            end
        end
    end
    return filter.CONTINUE
end

core.register_filter("rayvllm_usage", Usage, function(usage, args)
    return usage
end)

local function split(key)
    local a, b, c = key:match("^(.-)%z(.-)%z(.*)$")
    return a, b, c
end

local function sorted_keys(tbl)
    local keys = {}
    for k in pairs(tbl) do
        keys[#keys + 1] = k
    end
    table.sort(keys)
    return keys
end

-- A counter's HELP, TYPE and series: its table's keys are the three label values, joined by "\0".
local function counter(out, name, help, tbl, third)
    out[#out + 1] = "# HELP " .. name .. " " .. help
    out[#out + 1] = "# TYPE " .. name .. " counter"
    for _, key in ipairs(sorted_keys(tbl)) do
        local tenant, model, value = split(key)
        local series = string.format('%s{tenant="%s",model="%s",%s="%s"}', name, tenant, model, third, value)
        out[#out + 1] = string.format("%s %d", series, tbl[key])
    end
end

local function metrics()
    local out = {}
    counter(out, "rayvllm_door_requests_total", "Requests answered by the front door, by tenant (-: the clusters' "
        .. "key), model (-: none it serves) and status.", requests, "code")
    counter(out, "rayvllm_door_tokens_total", "Tokens of the answers through the front door: prompt (in) and "
        .. "completion (out), by tenant and model.", tokens, "kind")
    out[#out + 1] = "# HELP rayvllm_door_response_seconds Seconds from a request's arrival at the door to its "
        .. "answer's headers (a stream's first event), by tenant."
    out[#out + 1] = "# TYPE rayvllm_door_response_seconds histogram"
    for _, tenant in ipairs(sorted_keys(latency)) do
        local h = latency[tenant]
        for i, le in ipairs(BUCKETS) do
            out[#out + 1] = string.format(
                'rayvllm_door_response_seconds_bucket{tenant="%s",le="%s"} %d', tenant, le, h.buckets[i] or 0
            )
        end
        out[#out + 1] =
            string.format('rayvllm_door_response_seconds_bucket{tenant="%s",le="+Inf"} %d', tenant, h.count)
        out[#out + 1] = string.format('rayvllm_door_response_seconds_sum{tenant="%s"} %.3f', tenant, h.sum)
        out[#out + 1] = string.format('rayvllm_door_response_seconds_count{tenant="%s"} %d', tenant, h.count)
    end
    return table.concat(out, "\n") .. "\n"
end

-- http-request use-service lua.door_metrics on the door's metrics frontend.
core.register_service("door_metrics", "http", function(applet)
    local body = metrics()
    applet:set_status(200)
    applet:add_header("content-type", "text/plain; version=0.0.4")
    applet:add_header("content-length", tostring(#body))
    applet:start_response()
    applet:send(body)
end)
