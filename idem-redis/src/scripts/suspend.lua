-- suspend: KEYS[1] the record; ARGV token.
-- Answers {'ok'} or {'lost'}. The lease ends now; the steps stay, and a claim with the same
-- fingerprint takes the key over and resumes the operation.
local key = KEYS[1]
local record, err = held(key, ARGV[1])
if err then
  return err
end
local now = now_ms()
local since = lease_times(key, record, now)
redis.call('SET', key, in_flight(record.fp, record.token, now, since, record.suspensions + 1,
  record.steps, record.step_bytes), 'KEEPTTL')
return {'ok'}
