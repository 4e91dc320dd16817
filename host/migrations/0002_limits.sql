-- Usage limits (rpm, tpm, min_interval, max_uses), counted by the permit
-- table's authority in the same step as each grant, on this server's clock,
-- over the grants of every process.
--
-- A grant counts in up to two scopes of its resource: the resource's own
-- (`scope = ''`, under the resource's limits) and its context's (`scope` is
-- the context's name, never empty, under the limits `per_context` sets).
-- Each scope is counted as a resource alone is, apart from the others.

-- One row per scope a grant claimed limits of: its grants ever and the time
-- of the newest. Every claimed grant locks the rows of its scopes first, so
-- the grants of a scope are judged one after another, each seeing the ones
-- before it.
CREATE TABLE repute_usage (
    tenant  text NOT NULL,
    kind    text NOT NULL,
    value   text NOT NULL,
    scope   text NOT NULL,
    uses    bigint NOT NULL DEFAULT 0,
    last_at timestamptz,
    PRIMARY KEY (tenant, kind, value, scope)
);

-- The grants of the last minute that a scope's rpm or tpm counts, with the
-- tokens each counts (its cost, or what it reconciled to). Older rows are
-- deleted by the next grant judged in their scope.
CREATE TABLE repute_grant (
    tenant text NOT NULL,
    kind   text NOT NULL,
    value  text NOT NULL,
    scope  text NOT NULL,
    at     timestamptz NOT NULL,
    permit integer NOT NULL,
    token  bigint NOT NULL,
    cost   bigint NOT NULL,
    PRIMARY KEY (tenant, kind, value, scope, at, permit, token)
);

-- Locks the usage row of one scope, made on first use. Its own statements,
-- so that what the judging reads next is committed after the lock was had.
CREATE FUNCTION repute_lock_scope(p_tenant text, p_kind text, p_value text, p_scope text)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO repute_usage (tenant, kind, value, scope) VALUES (p_tenant, p_kind, p_value, p_scope)
    ON CONFLICT DO NOTHING;
    PERFORM 1 FROM repute_usage
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope FOR UPDATE;
END
$$;

-- Judges a grant of `p_cost` at `t` in one scope whose usage row the caller
-- locked, under that scope's limits (NULL: none; `p_gap` in µs): drops the
-- grants that left the window, then answers NULL (admitted), 'held' (the
-- cost can never fit the tpm), 'spent' (max_uses reached) or 'limited' with
-- the µs until a grant may fit. (Not `found`, as the grant's column is
-- named: in plpgsql that name is the FOUND flag every statement sets.)
CREATE FUNCTION repute_judge_scope(
    p_tenant text, p_kind text, p_value text, p_scope text, t timestamptz,
    p_rpm integer, p_tpm bigint, p_gap bigint, p_max_uses bigint, p_cost bigint,
    OUT status text, OUT wait_us bigint)
LANGUAGE plpgsql AS $$
DECLARE
    u_uses bigint;
    u_last timestamptz;
    n bigint;
    used bigint;
    free_at timestamptz;
    leaves timestamptz;
BEGIN
    SELECT uses, last_at INTO u_uses, u_last FROM repute_usage
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope;
    IF p_max_uses IS NOT NULL AND u_uses >= p_max_uses THEN
        status := 'spent';
        RETURN;
    END IF;
    DELETE FROM repute_grant
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope
      AND at <= t - interval '60 seconds';
    free_at := t;
    IF p_gap IS NOT NULL AND u_last IS NOT NULL THEN
        free_at := greatest(free_at, u_last + p_gap * interval '1 microsecond');
    END IF;
    IF p_rpm IS NOT NULL OR p_tpm IS NOT NULL THEN
        SELECT count(*), coalesce(sum(cost), 0) INTO n, used FROM repute_grant
        WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope;
    END IF;
    IF p_rpm IS NOT NULL AND n >= p_rpm THEN
        -- The grant that must leave the window for one more to fit.
        SELECT g.at INTO leaves FROM repute_grant g
        WHERE g.tenant = p_tenant AND g.kind = p_kind AND g.value = p_value AND g.scope = p_scope
        ORDER BY g.at, g.permit, g.token OFFSET n - p_rpm LIMIT 1;
        free_at := greatest(free_at, leaves + interval '60 seconds');
    END IF;
    IF p_tpm IS NOT NULL THEN
        IF p_cost > p_tpm THEN
            -- Never fits: refused for this acquire only.
            status := 'held';
            RETURN;
        END IF;
        IF used + p_cost > p_tpm THEN
            SELECT w.at INTO leaves FROM (
                SELECT g.at, sum(g.cost) OVER (ORDER BY g.at, g.permit, g.token) AS freed FROM repute_grant g
                WHERE g.tenant = p_tenant AND g.kind = p_kind AND g.value = p_value AND g.scope = p_scope
            ) w WHERE w.freed >= used + p_cost - p_tpm ORDER BY w.at LIMIT 1;
            free_at := greatest(free_at, leaves + interval '60 seconds');
        END IF;
    END IF;
    IF free_at > t THEN
        status := 'limited';
        wait_us := ceil(extract(epoch FROM free_at - t) * 1e6)::bigint;
    END IF;
END
$$;

-- Counts a grant made at `t` in one scope: in the window only where an rpm
-- or tpm counts it, so a scope limited by min_interval or max_uses alone
-- keeps no rows.
CREATE FUNCTION repute_count_scope(
    p_tenant text, p_kind text, p_value text, p_scope text, t timestamptz,
    p_windowed boolean, p_permit integer, p_token bigint, p_cost bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF p_windowed THEN
        INSERT INTO repute_grant (tenant, kind, value, scope, at, permit, token, cost)
        VALUES (p_tenant, p_kind, p_value, p_scope, t, p_permit, p_token, p_cost);
    END IF;
    UPDATE repute_usage SET uses = uses + 1, last_at = greatest(last_at, t)
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope;
END
$$;

-- A grant of a permit that claims limits: the usage rows of its scopes
-- locked, then the permit taken as by the plain grant, then the grant
-- counted in each scope. The statements of a volatile function (and of the
-- volatile functions it calls) each read the data committed before they
-- start, so once the locks are held the counts include every grant that
-- held them before; one statement of common table expressions would read
-- every table as of its start, before it waited for the lock, and could
-- miss the grant it waited for. The resource's row is always locked before
-- the context's, and a grant locks one context's row at most, so grants
-- that share rows wait for each other in one order and never deadlock.
-- Limits are judged at `clock_timestamp()` after the locks, so the grants
-- of one scope are stamped in the order they were made.
--
-- Arguments: the permit, the pool's last token, the TTL (µs), the writer's
-- epoch (0: shared), the resource's limits (all NULL: its own scope is not
-- counted; `p_gap` min_interval in µs, rounded up), the cost, then the
-- context (NULL: none) and its limits (`p_crpm`, `p_ctpm`, `p_cgap` as the
-- resource's). The resource's scope is judged first: both must admit the
-- grant. Returns ('granted', token), ('held', NULL) (the permit is held, the
-- epoch is stale, or the cost can never fit a tpm: nothing counted),
-- ('limited', µs until the resource's limits may admit a grant), ('spent',
-- NULL) (max_uses reached) or ('context_limited', µs until the context's
-- limits may: the resource's other contexts may still be granted).
CREATE FUNCTION repute_claimed_grant(
    p_tenant text, p_kind text, p_value text, p_permit integer, p_last bigint, p_ttl bigint, p_epoch bigint,
    p_rpm integer, p_tpm bigint, p_gap bigint, p_max_uses bigint, p_cost bigint,
    p_context text, p_crpm integer, p_ctpm bigint, p_cgap bigint)
RETURNS TABLE (status text, found bigint) LANGUAGE plpgsql AS $$
DECLARE
    counted boolean := p_rpm IS NOT NULL OR p_tpm IS NOT NULL OR p_gap IS NOT NULL OR p_max_uses IS NOT NULL;
    t timestamptz;
    refused text;
    wait bigint;
    granted bigint;
BEGIN
    IF counted THEN
        PERFORM repute_lock_scope(p_tenant, p_kind, p_value, '');
    END IF;
    IF p_context IS NOT NULL THEN
        PERFORM repute_lock_scope(p_tenant, p_kind, p_value, p_context);
    END IF;
    t := clock_timestamp();
    IF EXISTS (SELECT 1 FROM repute_permit
               WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND permit = p_permit
                 AND expires_at > now()) THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint;
        RETURN;
    END IF;
    IF counted THEN
        SELECT j.status, j.wait_us INTO refused, wait
        FROM repute_judge_scope(p_tenant, p_kind, p_value, '', t, p_rpm, p_tpm, p_gap, p_max_uses, p_cost) j;
        IF refused IS NOT NULL THEN
            RETURN QUERY SELECT refused, wait;
            RETURN;
        END IF;
    END IF;
    IF p_context IS NOT NULL THEN
        SELECT j.status, j.wait_us INTO refused, wait
        FROM repute_judge_scope(p_tenant, p_kind, p_value, p_context, t, p_crpm, p_ctpm, p_cgap, NULL, p_cost) j;
        IF refused IS NOT NULL THEN
            -- A context's wait is its own: other contexts may still fit.
            RETURN QUERY SELECT CASE refused WHEN 'limited' THEN 'context_limited' ELSE refused END, wait;
            RETURN;
        END IF;
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
    IF counted THEN
        PERFORM repute_count_scope(p_tenant, p_kind, p_value, '', t,
                                   p_rpm IS NOT NULL OR p_tpm IS NOT NULL, p_permit, granted, p_cost);
    END IF;
    IF p_context IS NOT NULL THEN
        PERFORM repute_count_scope(p_tenant, p_kind, p_value, p_context, t,
                                   p_crpm IS NOT NULL OR p_ctpm IS NOT NULL, p_permit, granted, p_cost);
    END IF;
    RETURN QUERY SELECT 'granted'::text, granted;
END
$$;
