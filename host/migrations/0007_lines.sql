-- A group whose concurrency is full keeps a line of the pools it refused,
-- so that a slot one process frees is not taken again at once by the same
-- process while the others poll: a pool is admitted only while the live
-- leases and the pools ahead of it in line leave a slot; it leaves the line
-- when granted and joins at its end when refused. A pool that stops asking
-- for 250 ms is dropped; a refusal by the concurrency waits 20 ms at most,
-- not until the soonest lease expires. Each connection names its pool in the setting
-- `repute.pool` (a connection without one never joins a line and finds every
-- pool in it ahead). A release while any pool waits notifies the channel
-- `repute_freed` with the tenant, so waiters try at once.
CREATE TABLE repute_line (
    tenant      text NOT NULL,
    grp         text NOT NULL,
    pool        text NOT NULL,
    since       timestamptz NOT NULL,
    alive_until timestamptz NOT NULL,
    PRIMARY KEY (tenant, grp, pool)
);

-- 0003's judgement of one group, with the line kept under the group's
-- usage row lock (taken by the grant before it judges).
CREATE OR REPLACE FUNCTION repute_judge_group(
    p_tenant text, p_name text, t timestamptz, p_rpm integer, p_tpm bigint, p_gap bigint, p_rpd integer,
    p_tpd bigint, p_concurrency integer, p_cost bigint, OUT status text, OUT wait_us bigint)
LANGUAGE plpgsql AS $$
DECLARE
    u_last timestamptz;
    free_at timestamptz := t;
    w record;
    live bigint;
    soonest timestamptz;
    me text := nullif(current_setting('repute.pool', true), '');
    mine timestamptz;
    ahead bigint;
BEGIN
    SELECT last_at INTO u_last FROM repute_usage
    WHERE tenant = p_tenant AND kind = '' AND value = p_name AND scope = '';
    IF p_gap IS NOT NULL AND u_last IS NOT NULL THEN
        free_at := greatest(free_at, u_last + p_gap * interval '1 microsecond');
    END IF;
    SELECT * INTO w FROM repute_judge_window(p_tenant, '', p_name, '', 'minute', interval '60 seconds', t,
                                             p_rpm, p_tpm, p_cost);
    IF w.held THEN
        status := 'held';
        RETURN;
    END IF;
    free_at := greatest(free_at, w.free_at);
    SELECT * INTO w FROM repute_judge_window(p_tenant, '', p_name, '', 'day', interval '86400 seconds', t,
                                             p_rpd, p_tpd, p_cost);
    IF w.held THEN
        status := 'held';
        RETURN;
    END IF;
    free_at := greatest(free_at, w.free_at);
    IF free_at > t THEN
        status := 'limited';
        wait_us := ceil(extract(epoch FROM free_at - t) * 1e6)::bigint;
        RETURN;
    END IF;
    IF p_concurrency IS NOT NULL THEN
        DELETE FROM repute_group_lease l
        WHERE l.tenant = p_tenant AND l.grp = p_name AND NOT EXISTS (
            SELECT 1 FROM repute_permit p
            WHERE p.tenant = l.tenant AND p.kind = l.kind AND p.value = l.value AND p.permit = l.permit
              AND p.token = l.token AND p.expires_at > now());
        SELECT count(*), min(p.expires_at) INTO live, soonest
        FROM repute_group_lease l JOIN repute_permit p
          ON p.tenant = l.tenant AND p.kind = l.kind AND p.value = l.value AND p.permit = l.permit
         AND p.token = l.token AND p.expires_at > now()
        WHERE l.tenant = p_tenant AND l.grp = p_name;
        DELETE FROM repute_line WHERE tenant = p_tenant AND grp = p_name AND alive_until <= t;
        SELECT since INTO mine FROM repute_line WHERE tenant = p_tenant AND grp = p_name AND pool = me;
        SELECT count(*) INTO ahead FROM repute_line
        WHERE tenant = p_tenant AND grp = p_name AND pool IS DISTINCT FROM me
          AND (mine IS NULL OR (since, pool) < (mine, me));
        IF live + ahead >= p_concurrency THEN
            status := 'limited';
            IF me IS NOT NULL THEN
                INSERT INTO repute_line AS l (tenant, grp, pool, since, alive_until)
                VALUES (p_tenant, p_name, me, t, t + interval '250 milliseconds')
                ON CONFLICT (tenant, grp, pool) DO UPDATE SET alive_until = EXCLUDED.alive_until;
            END IF;
            -- Until the soonest lease expires (from `t`: the leases were
            -- granted before it), or 20 ms at most: the pool asks again
            -- within its place's 250 ms, and a release wakes it sooner.
            wait_us := least(greatest(ceil(extract(epoch FROM soonest - t) * 1e6)::bigint, 1), 20000);
            wait_us := coalesce(wait_us, 20000);
        END IF;
    END IF;
END
$$;

-- 0006's grant, leaving the lines of the claim's groups once granted.
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
    r record;
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
    SELECT * INTO r FROM repute_claimed_grant(
        p_tenant, p_kind, p_value, p_permit, greatest(p_last, g.floor), p_ttl, p_epoch, p_rpm, p_tpm, p_gap,
        p_max_uses, p_cost, p_context, p_crpm, p_ctpm, p_cgap, p_rpd, p_tpd, p_groups, p_grpm, p_gtpm, p_ggap,
        p_grpd, p_gtpd, p_gconcurrency) c;
    IF r.status = 'granted' THEN
        DELETE FROM repute_line l
        WHERE l.tenant = p_tenant AND l.grp = ANY (p_groups) AND l.pool = current_setting('repute.pool', true);
    END IF;
    RETURN QUERY SELECT r.status, r.found, r.grp;
END
$$;
