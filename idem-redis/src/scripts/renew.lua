-- renew: KEYS[1] the record; ARGV token, lease ms.
-- Answers {'ok'} or {'lost'}.
local key = KEYS[1]
local lease = tonumber(ARGV[2])
local record, err = held(key, ARGV[1])
if err then
  return err
end
local now = now_ms()
local since = lease_times(key, record, now)
redis.call('SET', key, in_flight(record.fp, record.token, now + lease, since,
  record.suspensions, record.steps, record.step_bytes), 'KEEPTTL')
-- The record lives at least as long as its lease.
if redis.call('PTTL', key) < lease then
  redis.call('PEXPIRE', key, ARGV[2])
end
return {'ok'}
