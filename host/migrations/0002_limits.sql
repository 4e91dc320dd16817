-- Usage limits (rpm, tpm, min_interval, max_uses), counted by the permit
-- table's authority in the same step as each grant, on this server's clock,
-- over the grants of every process.

-- One row per resource a grant claimed limits of: its grants ever and the
-- time of the newest. Every claimed grant of the resource locks this row
-- first, so such grants are judged one after another, each seeing the ones
-- before it.
CREATE TABLE repute_usage (
    tenant  text NOT NULL,
    kind    text NOT NULL,
    value   text NOT NULL,
    uses    bigint NOT NULL DEFAULT 0,
    last_at timestamptz,
    PRIMARY KEY (tenant, kind, value)
);

-- The grants of the last minute that an rpm or tpm counts, with the tokens
-- each counts (its cost, or what it reconciled to). Older rows are deleted
-- by the next grant of their resource.
CREATE TABLE repute_grant (
    tenant text NOT NULL,
    kind   text NOT NULL,
    value  text NOT NULL,
    at     timestamptz NOT NULL,
    permit integer NOT NULL,
    token  bigint NOT NULL,
    cost   bigint NOT NULL,
    PRIMARY KEY (tenant, kind, value, at, permit, token)
);

-- A grant of a permit that claims limits: the usage row locked, then the
-- permit taken as by the plain grant, then the grant counted. The statements
-- of a volatile function each read the data committed before they start,
-- so once the lock is held the counts include every grant that held it
-- before; one statement of common table expressions would read every table
-- as of its start, before it waited for the lock, and could miss the grant
-- it waited for. Limits are judged at `clock_timestamp()` after the lock, so
-- the grants of one resource are stamped in the order they were made.
--
-- Arguments: the permit, the pool's last token, the TTL (µs), the writer's
-- epoch (0: shared), the limits (NULL: none; `p_gap` min_interval in µs,
-- rounded up) and the cost. Returns ('granted', token), ('held', NULL) (the
-- permit is held, or the epoch is stale; nothing counted), ('limited', µs
-- until a grant may fit) or ('spent', NULL) (max_uses reached).
CREATE FUNCTION repute_claimed_grant(
    p_tenant text, p_kind text, p_value text, p_permit integer, p_last bigint, p_ttl bigint, p_epoch bigint,
    p_rpm integer, p_tpm bigint, p_gap bigint, p_max_uses bigint, p_cost bigint)
RETURNS TABLE (status text, found bigint) LANGUAGE plpgsql AS $$
DECLARE
    u_uses bigint;
    u_last timestamptz;
    t timestamptz;
    n bigint;
    used bigint;
    free_at timestamptz;
    leaves timestamptz;
    granted bigint;
BEGIN
    INSERT INTO repute_usage (tenant, kind, value) VALUES (p_tenant, p_kind, p_value) ON CONFLICT DO NOTHING;
    SELECT uses, last_at INTO u_uses, u_last FROM repute_usage
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value FOR UPDATE;
    t := clock_timestamp();
    IF EXISTS (SELECT 1 FROM repute_permit
               WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND permit = p_permit
                 AND expires_at > now()) THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint;
        RETURN;
    END IF;
    IF p_max_uses IS NOT NULL AND u_uses >= p_max_uses THEN
        RETURN QUERY SELECT 'spent'::text, NULL::bigint;
        RETURN;
    END IF;
    DELETE FROM repute_grant
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND at <= t - interval '60 seconds';
    free_at := t;
    IF p_gap IS NOT NULL AND u_last IS NOT NULL THEN
        free_at := greatest(free_at, u_last + p_gap * interval '1 microsecond');
    END IF;
    IF p_rpm IS NOT NULL OR p_tpm IS NOT NULL THEN
        SELECT count(*), coalesce(sum(cost), 0) INTO n, used FROM repute_grant
        WHERE tenant = p_tenant AND kind = p_kind AND value = p_value;
    END IF;
    IF p_rpm IS NOT NULL AND n >= p_rpm THEN
        -- The grant that must leave the window for one more to fit.
        SELECT at INTO leaves FROM repute_grant
        WHERE tenant = p_tenant AND kind = p_kind AND value = p_value
        ORDER BY at, permit, token OFFSET n - p_rpm LIMIT 1;
        free_at := greatest(free_at, leaves + interval '60 seconds');
    END IF;
    IF p_tpm IS NOT NULL THEN
        IF p_cost > p_tpm THEN
            -- Never fits: refused for this acquire only.
            RETURN QUERY SELECT 'held'::text, NULL::bigint;
            RETURN;
        END IF;
        IF used + p_cost > p_tpm THEN
            SELECT w.at INTO leaves FROM (
                SELECT g.at, sum(g.cost) OVER (ORDER BY g.at, g.permit, g.token) AS freed FROM repute_grant g
                WHERE g.tenant = p_tenant AND g.kind = p_kind AND g.value = p_value
            ) w WHERE w.freed >= used + p_cost - p_tpm ORDER BY w.at LIMIT 1;
            free_at := greatest(free_at, leaves + interval '60 seconds');
        END IF;
    END IF;
    IF free_at > t THEN
        RETURN QUERY SELECT 'limited'::text, ceil(extract(epoch FROM free_at - t) * 1e6)::bigint;
        RETURN;
    END IF;
    INSERT INTO repute_permit AS p (tenant, kind, value, permit, token, expires_at)
    SELECT p_tenant, p_kind, p_value, p_permit, p_last + 1, now() + p_ttl * interval '1 microsecond'
    WHERE p_epoch = 0 OR EXISTS (SELECT 1 FROM repute_tenant r WHERE r.tenant = p_tenant AND r.epoch = p_epoch)
    ON CONFLICT (tenant, kind, value, permit) DO UPDATE
    SET token = greatest(p.token, p_last) + 1, expires_at = EXCLUDED.expires_at
    WHERE p.expires_at <= now()
    RETURNING p.token INTO granted;
    IF granted IS NULL THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint;
        RETURN;
    END IF;
    IF p_rpm IS NOT NULL OR p_tpm IS NOT NULL THEN
        INSERT INTO repute_grant (tenant, kind, value, at, permit, token, cost)
        VALUES (p_tenant, p_kind, p_value, t, p_permit, granted, p_cost);
    END IF;
    UPDATE repute_usage SET uses = uses + 1, last_at = greatest(last_at, t)
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value;
    RETURN QUERY SELECT 'granted'::text, granted;
END
$$;
