-- Times and writes of a record in flight, for the scripts that weigh a lease or write one.

-- Milliseconds on the server's clock, so every instance agrees on leases.
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- When an in-flight record was first claimed, and when its lease lapses, on the server's
-- clock at `now`. A CLAIMED record keeps its lease and lifetime instead: its expiry, set to
-- the lifetime at the claim, has run down since.
local function lease_times(key, record, now)
  if record.state == IN_FLIGHT then
    return record.second, record.first
  end
  local claimed_at = now - (record.second - redis.call('PTTL', key))
  return claimed_at, claimed_at + record.first
end

-- An in-flight record, its times on the server's clock.
local function in_flight(fp, token, lease_until, since, suspensions, steps, step_bytes)
  return string.char(VERSION, IN_FLIGHT) .. fp .. token ..
    struct.pack('>ddI4I4', lease_until, since, suspensions, steps) .. step_bytes
end

