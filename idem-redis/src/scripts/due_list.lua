-- due_list: KEYS[1] the due index; ARGV how many entries at most. Changes nothing.
-- Answers {'listed', now .. entries}: the server's time in ms, then each entry whose time has
-- come, earliest first: its 48 bytes, then its score (ms), as big-endian doubles.
local now = now_ms()
local listed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[1]))
local out = {struct.pack('>d', now)}
for i = 1, #listed, 2 do
  out[#out + 1] = listed[i] .. struct.pack('>d', tonumber(listed[i + 1]))
end
return {'listed', table.concat(out)}
