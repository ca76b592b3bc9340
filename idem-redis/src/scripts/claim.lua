-- claim: KEYS[1] the record; ARGV fingerprint, token, lease ms, in-flight lifetime ms, and for
-- a route the service resumes itself, its resume_after ms and the request to keep.
-- Sent when a claim without a script (SET NX GET) found the key in flight, or could not read
-- what it found, and to confirm a claim that waits for replicas.
-- Answers {'claimed'}, {'in_flight'}, {'completed', response}, {'mismatch', stored fp}, or
-- {'resumed', progress} for the takeover of an operation that stopped part-way: progress is
-- the count of suspensions as four big-endian bytes, then the steps' bytes in order.
local key = KEYS[1]
local fp, token, lease, lifetime = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

local record, err = load(key)
if err then
  return err
end
if record then
  -- One fingerprint per key, whatever the record's state.
  if record.fp ~= fp then
    return {'mismatch', record.fp}
  end
  if record.state == DONE then
    return {'completed', record.response}
  end
end
local now = now_ms()
-- The claim's own request, due resume_after past its lease, as a fresh claim keeps it.
local kept = nil
if ARGV[5] then
  local after = tonumber(ARGV[5])
  kept = {after = after, resume_at = now + lease + after, request = ARGV[6]}
end
local since = now
if record then
  local lease_until
  since, lease_until = lease_times(key, record, now)
  if lease_until > now and record.token ~= token then
    return {'in_flight'}
  end
  -- The holder's lease lapsed: take over below, fencing it out with the new token. Or this is
  -- this very claim sent again, because its first answer was lost on the way (a cluster
  -- connection retries a command whose node went away), or to confirm it: the token is drawn
  -- afresh for every claim, so no other request holds it. It is written again, so that a WAIT
  -- after it covers the record. A takeover keeps when the key was first claimed.
  if record.steps > 0 or record.suspensions > 0 then
    -- Resume: keep the steps, the suspensions and the expiry (at least the lease).
    redis.call('SET', key, in_flight(fp, token, now + lease, since, record.suspensions,
      record.steps, record.step_bytes, kept), 'KEEPTTL')
    if redis.call('PTTL', key) < lease then
      redis.call('PEXPIRE', key, ARGV[3])
    end
    return {'resumed', struct.pack('>I4', record.suspensions) .. table.concat(steps_of(record))}
  end
end
redis.call('SET', key, in_flight(fp, token, now + lease, since, 0, 0, '', kept), 'PX', lifetime)
return {'claimed'}
