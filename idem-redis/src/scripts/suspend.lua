-- suspend: KEYS[1] the record; ARGV token, and the ms from now at which a resumable operation
-- is due for resumption (negative, or absent: never on its own).
-- Answers {'ok'} or {'lost'}. The lease ends now; the steps stay, and a claim with the same
-- fingerprint takes the key over and resumes the operation.
local key = KEYS[1]
local record, err = held(key, ARGV[1])
if err then
  return err
end
local now = now_ms()
local since, lease_until = lease_times(key, record, now)
local kept = kept_of(record, lease_until)
if kept then
  local resume_in = tonumber(ARGV[2] or '-1')
  kept.resume_at = -1
  if resume_in >= 0 then
    kept.resume_at = now + resume_in
  end
end
redis.call('SET', key, in_flight(record.fp, record.token, now, since, record.suspensions + 1,
  record.steps, record.step_bytes, kept), 'KEEPTTL')
return {'ok'}
