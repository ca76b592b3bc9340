-- renew: KEYS[1] the record; ARGV token, lease ms.
-- Answers {'ok'} or {'lost'}.
local key = KEYS[1]
local lease = tonumber(ARGV[2])
local _, err = held(key, ARGV[1])
if err then
  return err
end
redis.call('HSET', key, 'lease_until', int(now_ms() + lease))
-- The record lives at least as long as its lease.
if redis.call('PTTL', key) < lease then
  redis.call('PEXPIRE', key, ARGV[2])
end
return {'ok'}
