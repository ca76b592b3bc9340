-- remove: KEYS[1] the record, whatever holds it and whatever it holds.
-- Answers {'none'}, {'removed', state} with state 'in_flight' or 'done', or
-- {'removed', 'unreadable'} for a record this build cannot read, which is removed too.
local key = KEYS[1]
local record, err = load(key)
if not record and not err then
  return {'none'}
end
redis.call('DEL', key)
if err then
  return {'removed', 'unreadable'}
end
if record.state == DONE then
  return {'removed', 'done'}
end
return {'removed', 'in_flight'}
