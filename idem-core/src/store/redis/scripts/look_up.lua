-- look_up: KEYS[1] the record. Changes nothing.
-- Answers {'none'}; {'completed', times .. head} where times packs the server's time, when the
-- response was stored (-1: not kept), when the record expires and the response's length,
-- and head is the response's first 4 bytes (version, body kind, status); or
-- {'in_flight', times .. steps} where times packs the server's time, when the key was first
-- claimed (-1: not kept), when the lease lapses, when the record expires, and the count of
-- suspensions, and steps is the recorded steps' bytes in order. Times are ms, as doubles.
local key = KEYS[1]
local record, err = load(key)
if err then
  return err
end
if not record then
  return {'none'}
end
local now = now_ms()
local expires = now + redis.call('PTTL', key)
if record.state == 'done' then
  local response = record.response
  if not response then
    return {'corrupt', 'a completed record without response'}
  end
  local at = tonumber(redis.call('HGET', key, 'at') or '-1')
  return {'completed', struct.pack('>dddd', now, at, expires, #response) .. string.sub(response, 1, 4)}
end
local since = tonumber(redis.call('HGET', key, 'since') or '-1')
local suspensions = tonumber(redis.call('HGET', key, 'att') or '0')
local steps = tonumber(redis.call('HGET', key, 'sc') or '0')
local parts = {struct.pack('>ddddI4', now, since, record.lease_until, expires, suspensions)}
for i = 0, steps - 1 do
  local step = redis.call('HGET', key, 's' .. i)
  if not step then
    return {'corrupt', 'step ' .. i .. ' of ' .. steps .. ' is missing'}
  end
  parts[#parts + 1] = step
end
return {'in_flight', table.concat(parts)}
