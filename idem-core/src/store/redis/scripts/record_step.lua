-- record_step: KEYS[1] the record; ARGV token, index, the step's bytes.
-- Answers {'ok'} or {'lost'}: the step is appended only to a record in flight under the token
-- that holds exactly `index` steps. The holder's own step sent again answers {'ok'}, and is
-- written again, so that a WAIT after it covers the record.
local key = KEYS[1]
local _, err = held(key, ARGV[1])
if err then
  return err
end
local index = tonumber(ARGV[2])
local steps = tonumber(redis.call('HGET', key, 'sc') or '0')
if index < steps and redis.call('HGET', key, 's' .. index) == ARGV[3] then
  redis.call('HSET', key, 'sc', int(steps))
  return {'ok'}
end
if index ~= steps then
  return {'lost'}
end
redis.call('HSET', key, 's' .. index, ARGV[3], 'sc', int(steps + 1))
return {'ok'}
