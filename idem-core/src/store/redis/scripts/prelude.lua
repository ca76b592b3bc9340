-- Shared by every idem script (prepended at compile time). One key's record is a hash:
--
--   v            the record format version: '1'
--   state        'in_flight' or 'done'
--   fp           the request fingerprint, hex of Fingerprint::to_bytes
--   token        the lease holder's token, 32 hex digits; kept once done, so that the
--                holder's repeated completion is recognised
--   lease_until  when the lease lapses, ms on the server clock  (in flight only)
--   since        when the key was first claimed, ms; kept by a takeover   (in flight only)
--   response     StoredResponse::encode bytes                    (done only)
--   at           when the response was stored, ms                (done only)
--   sc           how many steps ended, for an operation of several steps   (in flight only)
--   s0, s1, ..   each step's RecordedStep::encode bytes, in order          (in flight only)
--   att          how many times the operation was suspended                (in flight only)
--
-- The key's own expiry (PEXPIRE) is the record's lifetime. Every script answers a table
-- whose first element names the outcome.

local VERSION = '1'

-- Milliseconds on the server's clock, so every instance agrees on leases.
local function now_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- An integer as Redis expects it in a command (never in exponent notation).
local function int(n)
  return string.format('%.0f', n)
end

-- The record at `key`: nil if there is none, a table if it reads as a version 1 record,
-- or nil and the reply to give when it cannot be read. One HMGET reads what any script
-- decides by, the response (nil in flight) and the step count with it: a replay's claim is
-- then this and nothing else.
local function load(key)
  local kind = redis.call('TYPE', key)['ok']
  if kind == 'none' then
    return nil
  end
  if kind ~= 'hash' then
    return nil, {'corrupt', 'the key holds a ' .. kind .. ', not a hash'}
  end
  local f = redis.call('HMGET', key, 'v', 'state', 'fp', 'token', 'lease_until', 'response', 'sc')
  if f[1] ~= VERSION then
    return nil, {'version', f[1] or ''}
  end
  local record = {state = f[2], fp = f[3], token = f[4], lease_until = tonumber(f[5]),
    response = f[6], steps = tonumber(f[7] or '0')}
  if not record.fp then
    return nil, {'corrupt', 'the record has no fingerprint'}
  end
  if record.state == 'in_flight' then
    if not record.token or not record.lease_until then
      return nil, {'corrupt', 'an in-flight record without token or lease'}
    end
  elseif record.state ~= 'done' then
    return nil, {'corrupt', 'unknown state'}
  end
  return record
end

-- The record at `key` if it is in flight under `token`; otherwise nil and the reply to give.
local function held(key, token)
  local record, err = load(key)
  if err then
    return nil, err
  end
  if not record or record.state ~= 'in_flight' or record.token ~= token then
    return nil, {'lost'}
  end
  return record
end
