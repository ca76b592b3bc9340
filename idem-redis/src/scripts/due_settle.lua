-- due_settle: KEYS[1] the due index; ARGV[1] entries of 64 bytes each: an entry (48 bytes),
-- the score it was listed with and its next score (negative: drop it), as big-endian doubles.
-- Answers {'ok'}. An entry whose score changed since it was listed (a suspension moved it) is
-- left as it is now.
local index, entries = KEYS[1], ARGV[1]
for at = 1, #entries - 63, 64 do
  local entry = string.sub(entries, at, at + 47)
  local seen, next = struct.unpack('>dd', entries, at + 48)
  local score = redis.call('ZSCORE', index, entry)
  if score and tonumber(score) == seen then
    if next < 0 then
      redis.call('ZREM', index, entry)
    else
      redis.call('ZADD', index, 'XX', next, entry)
    end
  end
end
return {'ok'}
