-- complete: KEYS[1] the record; ARGV token, encoded response, ttl ms.
-- Answers {'ok'} or {'lost'}. The token stays with the completed record, so that its holder's
-- completion sent again (after the answer to the first was lost) answers {'ok'} too, and
-- changes nothing.
local key = KEYS[1]
local token = ARGV[1]
local record, err = load(key)
if err then
  return err
end
if not record or record.token ~= token then
  return {'lost'}
end
if record.state == 'done' then
  -- Written again, unchanged: a WAIT sent after this call then waits until the replicas
  -- have the whole record (replication is one ordered stream), which a completion sent again
  -- because it fell short of its replicas needs to know.
  redis.call('HSET', key, 'state', 'done')
  return {'ok'}
end
redis.call('HSET', key, 'state', 'done', 'response', ARGV[2], 'at', int(now_ms()))
-- What only an operation in flight needs goes: its steps and their count.
for i = 0, record.steps - 1 do
  redis.call('HDEL', key, 's' .. i)
end
redis.call('HDEL', key, 'lease_until', 'since', 'sc', 'att')
redis.call('PEXPIRE', key, ARGV[3])
return {'ok'}
