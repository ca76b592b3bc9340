-- Fenced writes: the record its holder's token holds in flight.

-- The record at `key` if it is in flight under `token`; otherwise nil and the reply to give.
local function held(key, token)
  local record, err = load(key)
  if err then
    return nil, err
  end
  if not record or record.state == DONE or record.token ~= token then
    return nil, {'lost'}
  end
  return record
end
