-- Partitioned mode: one tenant's state split by context across processes.
-- Each partition has its own owner row, epoch and checkpoint (named
-- `TENANT/pINDEXofCOUNT` in repute_tenant and repute_checkpoint); the
-- tenant's one log keeps, beside an entry about one context, the FNV-1a
-- hash of that context's name, so a partition reads only its own entries
-- and those every partition folds (ctx_hash NULL), under any count.
ALTER TABLE repute_log ADD COLUMN ctx_hash bigint;

-- The partition, of `parts`, that a context hash falls in: the hash is an
-- unsigned 64-bit number stored in a signed column.
CREATE FUNCTION repute_partition(hash bigint, parts integer) RETURNS integer
IMMUTABLE STRICT LANGUAGE sql AS $$
    SELECT (mod(hash::numeric + 18446744073709551616, 18446744073709551616) % parts)::integer
$$;
