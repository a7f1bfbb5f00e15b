"""The Redis store: one Lua script per acquisition, timed by the Redis server's clock, so
limits hold for every worker on every machine whatever their clocks say.

A release pushes a notice onto the endpoint's notice list, and a waiter refused a slot blocks
on that list (BLPOP) instead of asking again and again: each release wakes one waiter. A
notice pushed before its waiter blocks stays in the list, so none is lost in between; one
taken by a waiter that then loses the slot to a newcomer wakes nobody else, which is right,
as the slot is taken. Each grant trims the list to the slots still free, so notices left
from releases nobody waited for never wake more waiters than there are slots. A holder
killed mid-request releases nothing; its lease expires, and waiters notice on their next
bounded wait.

A refusal for concurrency also sets the endpoint's contention mark (a key that expires after
CONTENDED_SECONDS, renewed by every refusal), which tells limiters that keep slots between
requests to give them back.
"""

from __future__ import annotations

from evaluation.limits.base import CONTENDED_SECONDS, WINDOW_SECONDS, Denied, LimiterBackend, Limits, Usage

# Notices kept at most: more than the largest allowed concurrency would only wake waiters
# for slots that were taken long ago.
NOTICES_KEPT = 1024
NOTICES_TTL_MS = 60_000

_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local lease, max_concurrent = ARGV[1], tonumber(ARGV[2])
local max_requests, max_tokens, tokens = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local ttl, window = tonumber(ARGV[6]), tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= max_concurrent then
  redis.call('SET', KEYS[5], 1, 'PX', ARGV[8])
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {'concurrency', tonumber(oldest[2]) - now}
end
if max_requests > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if redis.call('ZCARD', KEYS[2]) >= max_requests then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return {'requests', tonumber(oldest[2]) + window - now}
  end
end
if max_tokens > 0 then
  local buckets = redis.call('HGETALL', KEYS[3])
  local used, oldest = 0, nil
  for i = 1, #buckets, 2 do
    local second = tonumber(buckets[i])
    if second * 1000 + 1000 + window <= now then
      redis.call('HDEL', KEYS[3], buckets[i])
    else
      used = used + tonumber(buckets[i + 1])
      if oldest == nil or second < oldest then oldest = second end
    end
  end
  if used > 0 and used + tokens > max_tokens then
    return {'tokens', oldest * 1000 + 1000 + window - now}
  end
end
redis.call('ZADD', KEYS[1], now + ttl, lease)
redis.call('PEXPIRE', KEYS[1], ttl + window)
local free = max_concurrent - redis.call('ZCARD', KEYS[1])
if free > 0 then
  redis.call('LTRIM', KEYS[4], 0, free - 1)
else
  redis.call('DEL', KEYS[4])
end
if max_requests > 0 then
  redis.call('ZADD', KEYS[2], now, lease)
  redis.call('PEXPIRE', KEYS[2], window + 1000)
end
if max_tokens > 0 and tokens > 0 then
  redis.call('HINCRBY', KEYS[3], math.floor(now / 1000), tokens)
  redis.call('PEXPIRE', KEYS[3], window + 2000)
end
return {'granted', 0}
"""

# A lease that already expired (and was swept by an acquisition) freed its slot back then.
_RELEASE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('LPUSH', KEYS[2], 1)
  redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]))
end
return 0
"""

_RENEW = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do
  local expires = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if expires and tonumber(expires) > now then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[i])
  end
end
redis.call('PEXPIRE', KEYS[1], ttl + 60000)
return 0
"""

_ADD_TOKENS = """
local now_parts = redis.call('TIME')
redis.call('HINCRBY', KEYS[1], math.floor(tonumber(now_parts[1])), tonumber(ARGV[1]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + 2000)
return 0
"""

_USAGE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local window = tonumber(ARGV[1])
local in_flight = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
local requests = redis.call('ZCOUNT', KEYS[2], '(' .. (now - window), '+inf')
local buckets = redis.call('HGETALL', KEYS[3])
local used = 0
for i = 1, #buckets, 2 do
  if tonumber(buckets[i]) * 1000 + 1000 + window > now then used = used + tonumber(buckets[i + 1]) end
end
return {in_flight, requests, used}
"""


class RedisBackend(LimiterBackend):
    """Slots in a sorted set scored by lease expiry, request starts in a sorted set scored by
    time, tokens in a hash of one-second buckets, release notices in a list, the contention
    mark in a key that expires; all times from the Redis server."""

    def __init__(self, url: str, *, window_seconds: float = WINDOW_SECONDS) -> None:
        import redis

        super().__init__(window_seconds=window_seconds)
        self.url = url
        self._redis = redis.Redis.from_url(url)
        self._acquire_script = self._redis.register_script(_ACQUIRE)
        self._release_script = self._redis.register_script(_RELEASE)
        self._renew_script = self._redis.register_script(_RENEW)
        self._add_tokens_script = self._redis.register_script(_ADD_TOKENS)
        self._usage_script = self._redis.register_script(_USAGE)

    @staticmethod
    def _keys(key: str) -> list[str]:
        # The {hash tag} keeps one endpoint's keys on one Redis Cluster slot, as a script
        # touching several keys requires.
        parts = ("slots", "requests", "tokens", "released", "waiting")
        return [f"quire:limiter:{{{key}}}:{part}" for part in parts]

    def _window_ms(self) -> int:
        return round(self.window_seconds * 1000)

    def try_acquire(self, key: str, lease: str, limits: Limits, tokens: int, ttl: float) -> Denied | None:
        arguments: list[str | int] = [
            lease,
            limits.max_concurrent,
            limits.requests_per_window or 0,
            limits.tokens_per_window or 0,
            tokens,
            round(ttl * 1000),
            self._window_ms(),
            round(CONTENDED_SECONDS * 1000),
        ]
        reason, wait_ms = self._acquire_script(keys=self._keys(key), args=arguments)
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        if reason == "granted":
            return None
        return Denied(reason=reason, wait_seconds=max(0, int(wait_ms)) / 1000)

    def contended(self, key: str) -> bool:
        return bool(self._redis.exists(self._keys(key)[4]))

    def release(self, key: str, lease: str) -> None:
        slots, _, _, released, _ = self._keys(key)
        self._release_script(keys=[slots, released], args=[lease, NOTICES_KEPT, NOTICES_TTL_MS])

    def wait_for_release(self, key: str, timeout: float) -> None:
        self._redis.blpop([self._keys(key)[3]], timeout=timeout)

    def renew(self, key: str, leases: list[str], ttl: float) -> None:
        if leases:
            self._renew_script(keys=self._keys(key)[:1], args=[round(ttl * 1000), *leases])

    def add_tokens(self, key: str, tokens: int) -> None:
        self._add_tokens_script(keys=self._keys(key)[2:3], args=[tokens, self._window_ms()])

    def usage(self, key: str) -> Usage:
        in_flight, requests, tokens = self._usage_script(keys=self._keys(key)[:3], args=[self._window_ms()])
        return Usage(in_flight=int(in_flight), requests_in_window=int(requests), tokens_in_window=int(tokens))

    def clear(self, key: str) -> None:
        self._redis.delete(*self._keys(key))
