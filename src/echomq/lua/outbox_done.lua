-- outbox_done: drop relayed entries from a queue's flow outbox, by child id.
-- KEYS[1]  the queue base emq:{q}:
-- ARGV     the child ids whose endings the parent's queue has applied (resolve_child)
-- Reply:   how many entries were removed (a repeat removes none: by member, never by
--          position, so an entry written since is kept).
-- Refusals: none.
-- Writes:  ZREM outbox ids, HDEL outmsg ids.
local B = KEYS[1]
--! include keys
if #ARGV == 0 then return 0 end
local n = redis.call('ZREM', B .. OUTBOX, unpack(ARGV))
redis.call('HDEL', B .. OUTMSG, unpack(ARGV))
return n
