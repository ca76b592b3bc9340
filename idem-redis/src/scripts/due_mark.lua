-- due_mark: KEYS[1] the due index; ARGV the entry (the operation's store key and its holder's
-- token), and the ms from now at which it is due.
-- Answers {'ok'}. Written before the record it names (a resumable claim, a suspension), so
-- that no resumable record is ever without its entry; an entry whose record never came is
-- dropped when it falls due.
redis.call('ZADD', KEYS[1], now_ms() + tonumber(ARGV[2]), ARGV[1])
return {'ok'}
