-- record_step: KEYS[1] the record; ARGV token, index, the step's bytes.
-- Answers {'ok'} or {'lost'}: the step is appended only to a record in flight under the token
-- that holds exactly `index` steps. The holder's own step sent again answers {'ok'}, and is
-- written again, so that a WAIT after it covers the record.
local key = KEYS[1]
local record, err = held(key, ARGV[1])
if err then
  return err
end
local index, step = tonumber(ARGV[2]), ARGV[3]
if index < record.steps then
  if steps_of(record)[index + 1] ~= step then
    return {'lost'}
  end
  redis.call('SET', key, record.value, 'KEEPTTL')
  return {'ok'}
end
if index ~= record.steps then
  return {'lost'}
end
local now = now_ms()
local since, lease_until = lease_times(key, record, now)
redis.call('SET', key, in_flight(record.fp, record.token, lease_until, since, record.suspensions,
  record.steps + 1, record.step_bytes .. struct.pack('>I4', #step) .. step,
  kept_of(record, lease_until)), 'KEEPTTL')
return {'ok'}
