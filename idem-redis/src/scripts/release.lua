-- release: KEYS[1] the record; ARGV token.
-- Answers {'ok'} or {'lost'}.
local key = KEYS[1]
local _, err = held(key, ARGV[1])
if err then
  return err
end
redis.call('DEL', key)
return {'ok'}
