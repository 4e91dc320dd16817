-- One history per store: a promoted standby or a restarted server may have
-- lost the last commits (asynchronous replication, synchronous_commit off),
-- and with them grants its holders still use and tokens it would issue again.
-- Each tenant's generation row names the server that last granted: when
-- another one answers, no permit is granted until the longest lease TTL the
-- row knows has passed, and tokens start above the server's clock in µs
-- (one grant per µs at most, so above every token issued before, while the
-- new server's clock is not behind the old one's by more than the failover
-- took). Times are µs since the Unix epoch on this server's clock.
CREATE TABLE repute_generation (
    tenant text PRIMARY KEY,
    server text NOT NULL,
    floor  bigint NOT NULL,
    resume bigint NOT NULL,
    ttl    bigint NOT NULL
);

-- The server process answering: its start time changes with every restart,
-- and a promoted standby's is its own. Inlined where a statement calls it
-- (a plain STABLE expression), so a grant's check costs one index lookup.
CREATE FUNCTION repute_server() RETURNS text LANGUAGE sql STABLE AS $$
    SELECT pg_postmaster_start_time()::text
$$;

-- The tenant's generation as a grant (`p_view`: the log position its pool
-- folded) or an extension (`p_view` NULL) of `p_ttl` µs finds it: the
-- floor tokens start above and the µs left before a permit may be granted.
-- A row naming another server starts a new generation; so does a missing
-- row when the tenant's log is behind the pool's view (the store lost it);
-- a missing row is otherwise a new tenant's, started without a floor by a
-- grant and left alone by an extension.
CREATE FUNCTION repute_generation(p_tenant text, p_ttl bigint, p_view bigint)
RETURNS TABLE (floor bigint, wait bigint) LANGUAGE plpgsql AS $$
DECLARE
    v_server text := repute_server();
    v_now bigint := (extract(epoch FROM now()) * 1000000)::bigint;
    v_lost boolean;
    g repute_generation;
BEGIN
    SELECT * INTO g FROM repute_generation r WHERE r.tenant = p_tenant;
    IF FOUND AND g.server = v_server THEN
        IF p_ttl > g.ttl THEN
            UPDATE repute_generation r SET ttl = p_ttl WHERE r.tenant = p_tenant AND r.ttl < p_ttl;
        END IF;
        RETURN QUERY SELECT g.floor, greatest(g.resume - v_now, 0);
        RETURN;
    END IF;
    v_lost := coalesce((SELECT t.log_seq FROM repute_tenant t WHERE t.tenant = p_tenant), 0) < p_view;
    IF g.tenant IS NOT NULL OR v_lost THEN
        INSERT INTO repute_generation AS r (tenant, server, floor, resume, ttl)
        VALUES (p_tenant, v_server, v_now, v_now + greatest(coalesce(g.ttl, 0), p_ttl), greatest(coalesce(g.ttl, 0), p_ttl))
        ON CONFLICT (tenant) DO UPDATE
        SET server = EXCLUDED.server, floor = greatest(EXCLUDED.floor, r.floor + 1),
            resume = v_now + greatest(r.ttl, p_ttl), ttl = greatest(r.ttl, p_ttl)
        WHERE r.server <> EXCLUDED.server;
        SELECT * INTO g FROM repute_generation r WHERE r.tenant = p_tenant;
    ELSIF v_lost IS NOT NULL THEN
        INSERT INTO repute_generation (tenant, server, floor, resume, ttl)
        VALUES (p_tenant, v_server, 0, 0, p_ttl)
        ON CONFLICT (tenant) DO NOTHING;
        SELECT * INTO g FROM repute_generation r WHERE r.tenant = p_tenant;
    END IF;
    RETURN QUERY SELECT coalesce(g.floor, 0), greatest(coalesce(g.resume, 0) - v_now, 0);
END
$$;

-- repute_viewed_grant, refused as ('recovering', µs left, NULL) while the
-- tenant's generation waits out the leases an earlier history may have
-- granted, and granting above the generation's floor.
CREATE OR REPLACE FUNCTION repute_viewed_grant(
    p_view bigint,
    p_tenant text, p_kind text, p_value text, p_permit integer, p_last bigint, p_ttl bigint, p_epoch bigint,
    p_rpm integer, p_tpm bigint, p_gap bigint, p_max_uses bigint, p_cost bigint,
    p_context text, p_crpm integer, p_ctpm bigint, p_cgap bigint,
    p_rpd integer, p_tpd bigint, p_groups text[], p_grpm integer[], p_gtpm bigint[], p_ggap bigint[],
    p_grpd integer[], p_gtpd bigint[], p_gconcurrency integer[])
RETURNS TABLE (status text, found bigint, grp integer) LANGUAGE plpgsql AS $$
DECLARE
    g record;
BEGIN
    IF coalesce((SELECT t.changed_seq FROM repute_tenant t WHERE t.tenant = p_tenant), 0) > p_view THEN
        RETURN QUERY SELECT 'stale'::text, NULL::bigint, NULL::integer;
        RETURN;
    END IF;
    SELECT * INTO g FROM repute_generation(p_tenant, p_ttl, p_view);
    IF g.wait > 0 THEN
        RETURN QUERY SELECT 'recovering'::text, g.wait, NULL::integer;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM repute_claimed_grant(
        p_tenant, p_kind, p_value, p_permit, greatest(p_last, g.floor), p_ttl, p_epoch, p_rpm, p_tpm, p_gap,
        p_max_uses, p_cost, p_context, p_crpm, p_ctpm, p_cgap, p_rpd, p_tpd, p_groups, p_grpm, p_gtpm, p_ggap,
        p_grpd, p_gtpd, p_gconcurrency);
END
$$;
