-- look_up: KEYS[1] the record. Changes nothing.
-- Answers {'none'}; {'completed', times .. head} where times packs the server's time, when the
-- response was stored, when the record expires and the response's length, and head is the
-- response's first 4 bytes (version, body kind, status); or {'in_flight', times .. steps}
-- where times packs the server's time, when the key was first claimed, when the lease lapses,
-- when the record expires, when it is due for resumption (-1: not on its own), and the count
-- of suspensions, and steps is the recorded steps' bytes in order. Times are ms, as doubles.
local key = KEYS[1]
local record, err = load(key)
if err then
  return err
end
if not record then
  return {'none'}
end
local now = now_ms()
local pttl = redis.call('PTTL', key)
local expires = now + pttl
if record.state == DONE then
  -- Stored with its TTL, which has run down since.
  local response = record.response
  local stored_at = now - (record.ttl - pttl)
  return {'completed', struct.pack('>dddd', now, stored_at, expires, #response) ..
    string.sub(response, 1, 4)}
end
local since, lease_until = lease_times(key, record, now)
local kept = kept_of(record, lease_until)
local resumes = -1
if kept then
  resumes = kept.resume_at
end
return {'in_flight', struct.pack('>dddddI4', now, since, lease_until, expires, resumes,
  record.suspensions) .. table.concat(steps_of(record))}
