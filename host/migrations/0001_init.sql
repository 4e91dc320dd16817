-- repute on PostgreSQL: tenants and their owners, checkpoints, the command
-- log and the permit table that is the shared lease authority.
--
-- Every decision that keeps two processes apart is taken here, under the row
-- locks of one statement or function, and every expiry is judged by this
-- server's clock (now()), never by a client's.

-- One row per tenant: who owns it (sharded mode), the owner epoch every
-- durable write is checked against, and the last log position handed out.
-- Appends lock this row, so log positions become visible in order.
CREATE TABLE repute_tenant (
    tenant     text PRIMARY KEY,
    owner      text,
    address    text,
    epoch      bigint NOT NULL DEFAULT 0,
    expires_at timestamptz NOT NULL DEFAULT '-infinity',
    log_seq    bigint NOT NULL DEFAULT 0
);

CREATE TABLE repute_checkpoint (
    tenant  text PRIMARY KEY REFERENCES repute_tenant,
    epoch   bigint NOT NULL,
    version bigint NOT NULL,
    log_seq bigint NOT NULL,
    bytes   bytea NOT NULL
);

-- Commands (reports, registrations, blocks) in the order every process folds them.
CREATE TABLE repute_log (
    tenant text NOT NULL,
    seq    bigint NOT NULL,
    entry  jsonb NOT NULL,
    at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, seq)
);

-- One row per resource permit, never deleted: `token` is the newest fencing
-- token issued for it and `expires_at` the end of the lease holding it
-- ('-infinity' once released).
CREATE TABLE repute_permit (
    tenant     text NOT NULL,
    kind       text NOT NULL,
    value      text NOT NULL,
    permit     integer NOT NULL,
    token      bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, kind, value, permit)
);

-- Saves a checkpoint. An owner's (epoch > 0) goes through if it still holds
-- the tenant's epoch and the stored version is the one it expects, and then
-- prunes the log entries the checkpoint folded. In shared mode (epoch 0)
-- every process folds the same log, so any checkpoint that folded at least as
-- much of it as the stored one may replace it; the log is kept, as other
-- processes may still need it. Returns ('ok', new version), ('stale_epoch',
-- stored epoch) or ('conflict', stored version); a refusal writes nothing.
CREATE FUNCTION repute_save(p_tenant text, p_epoch bigint, p_expected bigint, p_log_seq bigint, p_bytes bytea)
RETURNS TABLE (status text, found bigint) LANGUAGE plpgsql AS $$
DECLARE
    cur_epoch bigint;
    cur_version bigint;
    cur_log_seq bigint;
BEGIN
    SELECT t.epoch INTO cur_epoch FROM repute_tenant t WHERE t.tenant = p_tenant FOR SHARE;
    IF cur_epoch IS NULL THEN
        INSERT INTO repute_tenant (tenant) VALUES (p_tenant) ON CONFLICT DO NOTHING;
        SELECT t.epoch INTO cur_epoch FROM repute_tenant t WHERE t.tenant = p_tenant FOR SHARE;
    END IF;
    IF p_epoch <> 0 AND cur_epoch <> p_epoch THEN
        RETURN QUERY SELECT 'stale_epoch'::text, cur_epoch;
        RETURN;
    END IF;
    SELECT c.version, c.log_seq INTO cur_version, cur_log_seq
    FROM repute_checkpoint c WHERE c.tenant = p_tenant FOR UPDATE;
    IF (p_epoch <> 0 AND coalesce(cur_version, 0) <> p_expected)
       OR (p_epoch = 0 AND coalesce(cur_log_seq, 0) > p_log_seq) THEN
        RETURN QUERY SELECT 'conflict'::text, coalesce(cur_version, 0);
        RETURN;
    END IF;
    INSERT INTO repute_checkpoint AS c (tenant, epoch, version, log_seq, bytes)
    VALUES (p_tenant, p_epoch, coalesce(cur_version, 0) + 1, p_log_seq, p_bytes)
    ON CONFLICT (tenant) DO UPDATE
    SET epoch = EXCLUDED.epoch, version = EXCLUDED.version, log_seq = EXCLUDED.log_seq, bytes = EXCLUDED.bytes;
    IF p_epoch <> 0 THEN
        DELETE FROM repute_log l WHERE l.tenant = p_tenant AND l.seq <= p_log_seq;
    END IF;
    RETURN QUERY SELECT 'ok'::text, coalesce(cur_version, 0) + 1;
END
$$;

-- The acquire rate limit of a tenant served by many processes (shared mode),
-- as a GCRA: `tat` is the theoretical arrival time of the next acquire.
CREATE TABLE repute_rate (
    tenant text PRIMARY KEY,
    tat    timestamptz NOT NULL
);
