-- Reading a record: every script of a record starts with this, after the layout's constants
-- (record.rs writes them: VERSION, the states CLAIMED, IN_FLIGHT, RESUMABLE_CLAIMED, RESUMABLE
-- and DONE, and each field's position). One key's record is one string; record.rs draws its
-- layout. The key's own expiry (PX, PEXPIRE) is the record's lifetime. Every script answers a
-- table whose first element names the outcome.

-- The steps of an in-flight record, each its RecordedStep bytes, from their framing (a u32
-- length before each); nil if the framing does not add up to the record's count of them.
local function steps_of(record)
  local steps, bytes, at = {}, record.step_bytes, 1
  for i = 1, record.steps do
    if at + 3 > #bytes then
      return nil
    end
    local len = struct.unpack('>I4', bytes, at)
    if at + 3 + len > #bytes then
      return nil
    end
    steps[i] = string.sub(bytes, at + 4, at + 3 + len)
    at = at + 4 + len
  end
  if at ~= #bytes + 1 then
    return nil
  end
  return steps
end

-- The record at `key`: nil if there is none, a table if it reads as a record of this format,
-- or nil and the reply to give when it cannot be read.
local function load(key)
  local value = redis.pcall('GET', key)
  if type(value) == 'table' then
    return nil, {'corrupt', 'the key holds a ' .. redis.call('TYPE', key)['ok'] .. ', not a record'}
  end
  if not value then
    return nil
  end
  local version, state = string.byte(value, 1, 2)
  if version ~= VERSION then
    return nil, {'version', tostring(version or '')}
  end
  local record = {value = value, state = state, fp = string.sub(value, FP_AT, FP_END),
    token = string.sub(value, TOKEN_AT, TOKEN_END)}
  if state == DONE then
    if #value < RESPONSE_AT - 1 then
      return nil, {'corrupt', 'a completed record shorter than its header'}
    end
    record.ttl = struct.unpack('>d', value, TTL_AT)
    record.response = string.sub(value, RESPONSE_AT)
  elseif state == CLAIMED or state == IN_FLIGHT or state == RESUMABLE_CLAIMED
      or state == RESUMABLE then
    if #value < STEPS_AT - 1 then
      return nil, {'corrupt', 'an in-flight record shorter than its header'}
    end
    record.fresh = state == CLAIMED or state == RESUMABLE_CLAIMED
    record.first, record.second, record.suspensions, record.steps =
      struct.unpack('>ddI4I4', value, TIMES_AT)
    local steps_at = STEPS_AT
    if state == RESUMABLE_CLAIMED or state == RESUMABLE then
      if #value < STEPS_AT - 1 + KEPT_HEAD then
        return nil, {'corrupt', 'a resumable record shorter than its header'}
      end
      local after, resume_at, len = struct.unpack('>ddI4', value, STEPS_AT)
      steps_at = STEPS_AT + KEPT_HEAD + len
      if #value < steps_at - 1 then
        return nil, {'corrupt', 'a resumable record shorter than its kept request'}
      end
      record.kept = {after = after, resume_at = resume_at,
        request = string.sub(value, STEPS_AT + KEPT_HEAD, steps_at - 1)}
    end
    record.step_bytes = string.sub(value, steps_at)
    if not steps_of(record) then
      return nil, {'corrupt', 'the steps of an in-flight record do not add up'}
    end
  else
    return nil, {'corrupt', 'an unknown state'}
  end
  return record
end

