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
if record.state == DONE then
  -- Written again, unchanged: a WAIT sent after this call then waits until the replicas
  -- have the whole record (replication is one ordered stream), which a completion sent again
  -- because it fell short of its replicas needs to know.
  redis.call('SET', key, record.value, 'KEEPTTL')
  return {'ok'}
end
-- What only an operation in flight needs (its lease, steps and suspensions) goes with it. The
-- TTL is kept rather than the time: stored `ttl - PTTL` ms ago, without asking for the time.
redis.call('SET', key, string.char(VERSION, DONE) .. record.fp .. token ..
  struct.pack('>d', tonumber(ARGV[3])) .. ARGV[2], 'PX', ARGV[3])
return {'ok'}
