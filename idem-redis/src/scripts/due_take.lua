-- due_take: KEYS[1] the record of an entry of the due index; ARGV the entry's token, and how
-- long to defer the operation if it is due (hold, ms).
-- The record decides, the index only points at it. Answers {'due', next .. suspensions ..
-- request} for an operation held by this token, resumable, whose lease lapsed and whose time
-- has come: it is deferred until `next` (ms, a big-endian double), so that no other call
-- answers it meanwhile, and the count of suspensions (u32) and the kept request follow.
-- {'later', at} when it is not due yet (at: when it may be, ms); {'gone', why} when the entry
-- names no operation to resume: no record (it expired, was released or removed), completed,
-- taken over by another claim (which has its own entry), or not resumed on its own.
local key, token, hold = KEYS[1], ARGV[1], tonumber(ARGV[2])
local record, err = load(key)
if err then
  return err
end
if not record then
  return {'gone', 'no record'}
end
if record.state == DONE then
  return {'gone', 'completed'}
end
if record.token ~= token then
  return {'gone', 'taken over'}
end
if not record.kept then
  return {'gone', 'no kept request'}
end
local now = now_ms()
local since, lease_until = lease_times(key, record, now)
local kept = kept_of(record, lease_until)
if kept.resume_at < 0 then
  return {'gone', 'not resumed on its own'}
end
if lease_until > now or kept.resume_at > now then
  return {'later', struct.pack('>d', math.max(lease_until, kept.resume_at))}
end
kept.resume_at = now + hold
redis.call('SET', key, in_flight(record.fp, record.token, lease_until, since, record.suspensions,
  record.steps, record.step_bytes, kept), 'KEEPTTL')
return {'due', struct.pack('>dI4', kept.resume_at, record.suspensions) .. kept.request}
