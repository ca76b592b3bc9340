-- complete: KEYS[1] the record; ARGV token, encoded response, ttl ms.
-- Answers {'ok'} or {'lost'}. The token stays with the completed record, so that its holder's
-- completion sent again (after the answer to the first was lost) answers {'ok'} too, and
-- changes nothing.
local key, token = KEYS[1], ARGV[1]

-- The completed record, in place of the in-flight one: what only an operation in flight needs
-- (its lease, steps and suspensions) goes with it. The TTL is kept rather than the time:
-- stored `ttl - PTTL` ms ago, without asking for the time.
local function complete(value)
  redis.call('SET', key, string.char(VERSION, DONE) .. string.sub(value, FP_AT, TOKEN_END) ..
    struct.pack('>d', tonumber(ARGV[3])) .. ARGV[2], 'PX', ARGV[3])
  return {'ok'}
end

-- The usual completion, read no further than it decides by: a record of this format in flight
-- under this token, without steps (a header and nothing after it, its count of steps zero).
local value = redis.pcall('GET', key)
if type(value) == 'string' and #value == STEPS_AT - 1 and string.byte(value, 1) == VERSION
    and (string.byte(value, 2) == CLAIMED or string.byte(value, 2) == IN_FLIGHT)
    and string.sub(value, STEPS_AT - 4) == '\0\0\0\0'
    and string.sub(value, TOKEN_AT, TOKEN_END) == token then
  return complete(value)
end
-- Anything else, read whole.
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
return complete(record.value)
