-- renew: KEYS[1] the record; ARGV token, lease ms.
-- Answers {'ok'} or {'lost'}. A resumable operation is due resume_after past the new lease.
local key = KEYS[1]
local lease = tonumber(ARGV[2])
local record, err = held(key, ARGV[1])
if err then
  return err
end
local now = now_ms()
local since, lease_until = lease_times(key, record, now)
local kept = kept_of(record, lease_until)
if kept then
  kept.resume_at = now + lease + kept.after
end
redis.call('SET', key, in_flight(record.fp, record.token, now + lease, since,
  record.suspensions, record.steps, record.step_bytes, kept), 'KEEPTTL')
-- The record lives at least as long as its lease.
if redis.call('PTTL', key) < lease then
  redis.call('PEXPIRE', key, ARGV[2])
end
return {'ok'}
