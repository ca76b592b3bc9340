-- complete: KEYS[1] the record; ARGV token, encoded response, ttl ms.
-- Answers {'ok'} or {'lost'}.
local key = KEYS[1]
local _, err = held(key, ARGV[1])
if err then
  return err
end
redis.call('HSET', key, 'state', 'done', 'response', ARGV[2])
redis.call('HDEL', key, 'token', 'lease_until')
redis.call('PEXPIRE', key, ARGV[3])
return {'ok'}
