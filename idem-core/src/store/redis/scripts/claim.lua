-- claim: KEYS[1] the record; ARGV fingerprint, token, lease ms, in-flight lifetime ms.
-- Answers {'claimed'}, {'in_flight'}, {'completed', response}, {'mismatch', stored fp}, or
-- {'resumed', progress} for the takeover of an operation that stopped part-way: progress is
-- the count of suspensions as four big-endian bytes, then the steps' bytes in order.
local key = KEYS[1]
local fp, token, lease, lifetime = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local record, err = load(key)
if err then
  return err
end
if record then
  -- One fingerprint per key, whatever the record's state.
  if record.fp ~= fp then
    return {'mismatch', record.fp}
  end
  if record.state == 'done' then
    if not record.response then
      return {'corrupt', 'a completed record without response'}
    end
    return {'completed', record.response}
  end
end
-- The server's time only where a lease is weighed or written: a replay never asks for it.
local now = now_ms()
if record then
  if record.lease_until > now and record.token ~= token then
    return {'in_flight'}
  end
  -- The holder's lease lapsed: take over below, fencing it out with the new token. Or this is
  -- this very claim sent again, because its first answer was lost on the way (a cluster
  -- connection retries a command whose node went away): the token is drawn afresh for every
  -- claim, so no other request holds it. It is written again, so that a WAIT after it covers
  -- the record.
  local steps = record.steps
  local suspensions = tonumber(redis.call('HGET', key, 'att') or '0')
  if steps > 0 or suspensions > 0 then
    -- Resume: keep the steps, the suspensions and the expiry (at least the lease).
    local progress = {struct.pack('>I4', suspensions)}
    for i = 0, steps - 1 do
      local step = redis.call('HGET', key, 's' .. i)
      if not step then
        return {'corrupt', 'step ' .. i .. ' of ' .. steps .. ' is missing'}
      end
      progress[#progress + 1] = step
    end
    redis.call('HSET', key, 'token', token, 'lease_until', int(now + tonumber(lease)))
    if redis.call('PTTL', key) < tonumber(lease) then
      redis.call('PEXPIRE', key, lease)
    end
    return {'resumed', table.concat(progress)}
  end
end

local fields = {'v', VERSION, 'state', 'in_flight', 'fp', fp, 'token', token,
  'lease_until', int(now + tonumber(lease))}
-- A takeover keeps when the key was first claimed: how long it has been blocked.
if not (record and redis.call('HEXISTS', key, 'since') == 1) then
  fields[#fields + 1] = 'since'
  fields[#fields + 1] = int(now)
end
redis.call('HSET', key, unpack(fields))
redis.call('PEXPIRE', key, lifetime)
return {'claimed'}
