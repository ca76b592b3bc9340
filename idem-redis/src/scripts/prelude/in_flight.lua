-- Times and writes of a record in flight, for the scripts that weigh a lease or write one.

-- When an in-flight record was first claimed, and when its lease lapses, on the server's
-- clock at `now`. A fresh claim keeps its lease and lifetime instead: its expiry, set to the
-- lifetime at the claim, has run down since.
local function lease_times(key, record, now)
  if not record.fresh then
    return record.second, record.first
  end
  local claimed_at = now - (record.second - redis.call('PTTL', key))
  return claimed_at, claimed_at + record.first
end

-- What a resumable record keeps, with when it is due on the server's clock: a fresh claim is
-- due `after` past its lease, which lapses at `lease_until`. Nil for a record that keeps no
-- request.
local function kept_of(record, lease_until)
  local kept = record.kept
  if kept and record.fresh then
    return {after = kept.after, resume_at = lease_until + kept.after, request = kept.request}
  end
  return kept
end

-- An in-flight record, its times on the server's clock; resumable when it keeps `kept`.
local function in_flight(fp, token, lease_until, since, suspensions, steps, step_bytes, kept)
  local state, section = IN_FLIGHT, ''
  if kept then
    state = RESUMABLE
    section = struct.pack('>ddI4', kept.after, kept.resume_at, #kept.request) .. kept.request
  end
  return string.char(VERSION, state) .. fp .. token ..
    struct.pack('>ddI4I4', lease_until, since, suspensions, steps) .. section .. step_bytes
end

