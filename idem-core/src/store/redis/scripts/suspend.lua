-- suspend: KEYS[1] the record; ARGV token.
-- Answers {'ok'} or {'lost'}. The lease ends now; the steps stay, and a claim with the same
-- fingerprint takes the key over and resumes the operation.
local key = KEYS[1]
local _, err = held(key, ARGV[1])
if err then
  return err
end
redis.call('HSET', key, 'lease_until', int(now_ms()))
redis.call('HINCRBY', key, 'att', 1)
return {'ok'}
