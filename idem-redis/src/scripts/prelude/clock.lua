-- The server's clock, for the scripts that weigh a lease or a resumption time.

-- Milliseconds on the server's clock, so every instance agrees on leases.
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

