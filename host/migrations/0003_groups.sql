-- Day windows (rpd, tpd) and quota groups (rpm, tpm, rpd, tpd, concurrency),
-- counted by the permit table's authority in the same call as each grant,
-- on this server's clock, over the grants of every process.
--
-- A group's scope is the tenant's, shared by every member resource: its
-- usage row in repute_usage has kind '' (no resource's kind is empty),
-- value the group's name and scope ''.

-- Bucketed windows, as the core's `Buckets` keeps them: a resource's day
-- (span 'day', scope ''), a group's minute ('minute') and day ('day'). Each
-- row is the grants made from `first` to `at` and their tokens; a grant
-- joins the newest row while that row's first grant is less than a 1024th
-- of the span old, and a row leaves with its newest grant. So a window
-- never admits more than its limit and keeps at most about 1026 rows,
-- whatever the rate. Older rows are deleted by the next grant judged in
-- their window.
CREATE TABLE repute_bucket (
    tenant text NOT NULL,
    kind   text NOT NULL,
    value  text NOT NULL,
    scope  text NOT NULL,
    span   text NOT NULL,
    first  timestamptz NOT NULL,
    at     timestamptz NOT NULL,
    grants bigint NOT NULL,
    tokens bigint NOT NULL,
    PRIMARY KEY (tenant, kind, value, scope, span, first)
);

-- The newest lease of each permit granted with a group that has a
-- concurrency: live while repute_permit still holds that token unexpired.
-- Ended rows are deleted by the next grant that counts the group; one row
-- a permit at most.
CREATE TABLE repute_group_lease (
    tenant text NOT NULL,
    grp    text NOT NULL,
    kind   text NOT NULL,
    value  text NOT NULL,
    permit integer NOT NULL,
    token  bigint NOT NULL,
    PRIMARY KEY (tenant, grp, kind, value, permit)
);

-- Each permit's newest claimed grant, as its reconcile needs it: when it
-- was made, whether the resource's day counted it, and the groups whose
-- minute and day did. One row a permit.
CREATE TABLE repute_claimed (
    tenant       text NOT NULL,
    kind         text NOT NULL,
    value        text NOT NULL,
    permit       integer NOT NULL,
    token        bigint NOT NULL,
    at           timestamptz NOT NULL,
    day          boolean NOT NULL,
    group_minute text[] NOT NULL,
    group_day    text[] NOT NULL,
    PRIMARY KEY (tenant, kind, value, permit)
);

-- Judges a grant of `p_cost` at `t` in one bucketed window whose scope's
-- usage row the caller locked (`p_rate` grants and `p_tokens` tokens over
-- `p_len`; NULL: none): drops the rows that left the window, then answers
-- the earliest instant the window admits the grant (`t` or later), or
-- `held` when the cost can never fit.
CREATE FUNCTION repute_judge_window(
    p_tenant text, p_kind text, p_value text, p_scope text, p_span text, p_len interval, t timestamptz,
    p_rate integer, p_tokens bigint, p_cost bigint, OUT free_at timestamptz, OUT held boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    used bigint;
    leaves timestamptz;
BEGIN
    free_at := t;
    held := false;
    IF p_rate IS NULL AND p_tokens IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM repute_bucket
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope AND span = p_span
      AND at <= t - p_len;
    SELECT coalesce(sum(grants), 0), coalesce(sum(tokens), 0) INTO n, used FROM repute_bucket
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope AND span = p_span;
    IF p_rate IS NOT NULL AND n + 1 > p_rate THEN
        SELECT w.at INTO leaves FROM (
            SELECT b.at, sum(b.grants) OVER (ORDER BY b.first) AS freed FROM repute_bucket b
            WHERE b.tenant = p_tenant AND b.kind = p_kind AND b.value = p_value AND b.scope = p_scope
              AND b.span = p_span
        ) w WHERE w.freed >= n + 1 - p_rate ORDER BY w.at LIMIT 1;
        free_at := greatest(free_at, leaves + p_len);
    END IF;
    IF p_tokens IS NOT NULL THEN
        IF p_cost > p_tokens THEN
            held := true;
            RETURN;
        END IF;
        IF used + p_cost > p_tokens THEN
            SELECT w.at INTO leaves FROM (
                SELECT b.at, sum(b.tokens) OVER (ORDER BY b.first) AS freed FROM repute_bucket b
                WHERE b.tenant = p_tenant AND b.kind = p_kind AND b.value = p_value AND b.scope = p_scope
                  AND b.span = p_span
            ) w WHERE w.freed >= used + p_cost - p_tokens ORDER BY w.at LIMIT 1;
            free_at := greatest(free_at, leaves + p_len);
        END IF;
    END IF;
END
$$;

-- Counts a grant of `p_cost` made at `t` in one bucketed window: in its
-- newest row while that row's first grant is less than a 1024th of the
-- span old, else in a new row.
CREATE FUNCTION repute_count_window(
    p_tenant text, p_kind text, p_value text, p_scope text, p_span text, p_len interval, t timestamptz,
    p_cost bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    newest timestamptz;
BEGIN
    SELECT max(first) INTO newest FROM repute_bucket
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope AND span = p_span;
    IF newest IS NOT NULL AND t - newest < p_len / 1024 THEN
        UPDATE repute_bucket SET at = greatest(at, t), grants = grants + 1, tokens = tokens + p_cost
        WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = p_scope AND span = p_span
          AND first = newest;
    ELSE
        INSERT INTO repute_bucket (tenant, kind, value, scope, span, first, at, grants, tokens)
        VALUES (p_tenant, p_kind, p_value, p_scope, p_span, t, t, 1, p_cost);
    END IF;
END
$$;

-- Judges a grant in one group whose usage row the caller locked: its
-- spacing, minute and day at `t`, then its live leases at now() (the
-- transaction's start: a lease that ended since still counts, which only
-- ever refuses more). Answers
-- NULL (admitted), 'held' (the cost can never fit) or 'limited' with the
-- µs until it may.
CREATE FUNCTION repute_judge_group(
    p_tenant text, p_name text, t timestamptz, p_rpm integer, p_tpm bigint, p_gap bigint, p_rpd integer,
    p_tpd bigint, p_concurrency integer, p_cost bigint, OUT status text, OUT wait_us bigint)
LANGUAGE plpgsql AS $$
DECLARE
    u_last timestamptz;
    free_at timestamptz := t;
    w record;
    live bigint;
    soonest timestamptz;
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
        IF live >= p_concurrency THEN
            status := 'limited';
            -- From `t`: the leases were granted before it, at most a TTL ago.
            wait_us := greatest(ceil(extract(epoch FROM soonest - t) * 1e6)::bigint, 1);
        END IF;
    END IF;
END
$$;

-- The grant's call, as 0002's with day windows and groups: the usage rows
-- of the resource's scope, of the context's, and of each group's are
-- locked first, in that order and the groups in name order, so that grants
-- sharing rows wait for each other in one order and never deadlock; then
-- the permit is taken as by the plain grant, and the grant counted in each
-- scope. The scopes are judged in order: the resource's (with its day),
-- the context's, then the groups' in the claim's order (`p_groups` and the
-- arrays of their limits, NULL elements for none; `p_ggap` in µs, rounded
-- up). Returns 0002's answers, and ('group_limited', µs, i) when the
-- claim's group at index i (from 0) refuses; `grp` is NULL otherwise.
DROP FUNCTION repute_claimed_grant(text, text, text, integer, bigint, bigint, bigint, integer, bigint, bigint, bigint,
                                   bigint, text, integer, bigint, bigint);

CREATE FUNCTION repute_claimed_grant(
    p_tenant text, p_kind text, p_value text, p_permit integer, p_last bigint, p_ttl bigint, p_epoch bigint,
    p_rpm integer, p_tpm bigint, p_gap bigint, p_max_uses bigint, p_cost bigint,
    p_context text, p_crpm integer, p_ctpm bigint, p_cgap bigint,
    p_rpd integer, p_tpd bigint, p_groups text[], p_grpm integer[], p_gtpm bigint[], p_ggap bigint[],
    p_grpd integer[], p_gtpd bigint[], p_gconcurrency integer[])
RETURNS TABLE (status text, found bigint, grp integer) LANGUAGE plpgsql AS $$
DECLARE
    counted boolean := p_rpm IS NOT NULL OR p_tpm IS NOT NULL OR p_gap IS NOT NULL OR p_max_uses IS NOT NULL
                       OR p_rpd IS NOT NULL OR p_tpd IS NOT NULL;
    daily boolean := p_rpd IS NOT NULL OR p_tpd IS NOT NULL;
    n integer := coalesce(array_length(p_groups, 1), 0);
    name text;
    t timestamptz;
    refused text;
    wait bigint;
    w record;
    granted bigint;
    g_minute text[] := '{}';
    g_day text[] := '{}';
BEGIN
    IF counted THEN
        PERFORM repute_lock_scope(p_tenant, p_kind, p_value, '');
    END IF;
    IF p_context IS NOT NULL THEN
        PERFORM repute_lock_scope(p_tenant, p_kind, p_value, p_context);
    END IF;
    FOR name IN SELECT DISTINCT g FROM unnest(p_groups) AS g ORDER BY g LOOP
        PERFORM repute_lock_scope(p_tenant, '', name, '');
    END LOOP;
    t := clock_timestamp();
    IF EXISTS (SELECT 1 FROM repute_permit
               WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND permit = p_permit
                 AND expires_at > now()) THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint, NULL::integer;
        RETURN;
    END IF;
    IF counted THEN
        SELECT j.status, j.wait_us INTO refused, wait
        FROM repute_judge_scope(p_tenant, p_kind, p_value, '', t, p_rpm, p_tpm, p_gap, p_max_uses, p_cost) j;
        IF refused IS NULL AND daily THEN
            SELECT * INTO w FROM repute_judge_window(p_tenant, p_kind, p_value, '', 'day', interval '86400 seconds', t,
                                                     p_rpd, p_tpd, p_cost);
            IF w.held THEN
                refused := 'held';
            ELSIF w.free_at > t THEN
                refused := 'limited';
                wait := ceil(extract(epoch FROM w.free_at - t) * 1e6)::bigint;
            END IF;
        ELSIF refused = 'limited' AND daily THEN
            -- The later of the minute's wait and the day's.
            SELECT * INTO w FROM repute_judge_window(p_tenant, p_kind, p_value, '', 'day', interval '86400 seconds', t,
                                                     p_rpd, p_tpd, p_cost);
            IF w.held THEN
                refused := 'held';
            ELSE
                wait := greatest(wait, ceil(extract(epoch FROM w.free_at - t) * 1e6)::bigint);
            END IF;
        END IF;
        IF refused IS NOT NULL THEN
            RETURN QUERY SELECT refused, wait, NULL::integer;
            RETURN;
        END IF;
    END IF;
    IF p_context IS NOT NULL THEN
        SELECT j.status, j.wait_us INTO refused, wait
        FROM repute_judge_scope(p_tenant, p_kind, p_value, p_context, t, p_crpm, p_ctpm, p_cgap, NULL, p_cost) j;
        IF refused IS NOT NULL THEN
            -- A context's wait is its own: other contexts may still fit.
            RETURN QUERY SELECT CASE refused WHEN 'limited' THEN 'context_limited' ELSE refused END, wait,
                                NULL::integer;
            RETURN;
        END IF;
    END IF;
    FOR i IN 1 .. n LOOP
        SELECT j.status, j.wait_us INTO refused, wait
        FROM repute_judge_group(p_tenant, p_groups[i], t, p_grpm[i], p_gtpm[i], p_ggap[i], p_grpd[i], p_gtpd[i],
                                p_gconcurrency[i], p_cost) j;
        IF refused IS NOT NULL THEN
            RETURN QUERY SELECT CASE refused WHEN 'limited' THEN 'group_limited' ELSE refused END, wait, i - 1;
            RETURN;
        END IF;
    END LOOP;
    INSERT INTO repute_permit AS p (tenant, kind, value, permit, token, expires_at)
    SELECT p_tenant, p_kind, p_value, p_permit, p_last + 1, now() + p_ttl * interval '1 microsecond'
    WHERE p_epoch = 0 OR EXISTS (SELECT 1 FROM repute_tenant r WHERE r.tenant = p_tenant AND r.epoch = p_epoch)
    ON CONFLICT (tenant, kind, value, permit) DO UPDATE
    SET token = greatest(p.token, p_last) + 1, expires_at = EXCLUDED.expires_at
    WHERE p.expires_at <= now()
    RETURNING p.token INTO granted;
    IF granted IS NULL THEN
        RETURN QUERY SELECT 'held'::text, NULL::bigint, NULL::integer;
        RETURN;
    END IF;
    IF counted THEN
        PERFORM repute_count_scope(p_tenant, p_kind, p_value, '', t,
                                   p_rpm IS NOT NULL OR p_tpm IS NOT NULL, p_permit, granted, p_cost);
    END IF;
    IF daily THEN
        PERFORM repute_count_window(p_tenant, p_kind, p_value, '', 'day', interval '86400 seconds', t, p_cost);
    END IF;
    IF p_context IS NOT NULL THEN
        PERFORM repute_count_scope(p_tenant, p_kind, p_value, p_context, t,
                                   p_crpm IS NOT NULL OR p_ctpm IS NOT NULL, p_permit, granted, p_cost);
    END IF;
    FOR i IN 1 .. n LOOP
        IF p_grpm[i] IS NOT NULL OR p_gtpm[i] IS NOT NULL THEN
            PERFORM repute_count_window(p_tenant, '', p_groups[i], '', 'minute', interval '60 seconds', t, p_cost);
            g_minute := g_minute || p_groups[i];
        END IF;
        IF p_grpd[i] IS NOT NULL OR p_gtpd[i] IS NOT NULL THEN
            PERFORM repute_count_window(p_tenant, '', p_groups[i], '', 'day', interval '86400 seconds', t, p_cost);
            g_day := g_day || p_groups[i];
        END IF;
        IF p_grpm[i] IS NOT NULL OR p_gtpm[i] IS NOT NULL OR p_grpd[i] IS NOT NULL OR p_gtpd[i] IS NOT NULL THEN
            UPDATE repute_usage SET uses = uses + 1, last_at = greatest(last_at, t)
            WHERE tenant = p_tenant AND kind = '' AND value = p_groups[i] AND scope = '';
        END IF;
        IF p_gconcurrency[i] IS NOT NULL THEN
            INSERT INTO repute_group_lease (tenant, grp, kind, value, permit, token)
            VALUES (p_tenant, p_groups[i], p_kind, p_value, p_permit, granted)
            ON CONFLICT ON CONSTRAINT repute_group_lease_pkey DO UPDATE SET token = EXCLUDED.token;
        END IF;
    END LOOP;
    IF counted OR n > 0 THEN
        INSERT INTO repute_claimed (tenant, kind, value, permit, token, at, day, group_minute, group_day)
        VALUES (p_tenant, p_kind, p_value, p_permit, granted, t, daily, g_minute, g_day)
        ON CONFLICT (tenant, kind, value, permit) DO UPDATE
        SET token = EXCLUDED.token, at = EXCLUDED.at, day = EXCLUDED.day, group_minute = EXCLUDED.group_minute,
            group_day = EXCLUDED.group_day;
    END IF;
    RETURN QUERY SELECT 'granted'::text, granted, NULL::integer;
END
$$;

-- A reconcile: the grant's minute rows (in the resource's scope and the
-- context's) count `p_used` from now on; and while the permit's claimed
-- grant is still this token's, the bucket rows holding it (the resource's
-- day, its groups' minute and day) count `p_used` for `p_reserved`.
CREATE FUNCTION repute_reconcile(
    p_tenant text, p_kind text, p_value text, p_permit integer, p_token bigint, p_context text,
    p_reserved bigint, p_used bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    c record;
BEGIN
    UPDATE repute_grant SET cost = p_used
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND permit = p_permit AND token = p_token
      AND scope IN ('', p_context);
    SELECT * INTO c FROM repute_claimed
    WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND permit = p_permit AND token = p_token;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF c.day THEN
        UPDATE repute_bucket SET tokens = greatest(tokens - p_reserved, 0) + p_used
        WHERE tenant = p_tenant AND kind = p_kind AND value = p_value AND scope = '' AND span = 'day'
          AND first <= c.at AND at >= c.at;
    END IF;
    UPDATE repute_bucket b SET tokens = greatest(b.tokens - p_reserved, 0) + p_used
    FROM unnest(c.group_minute) AS g(name)
    WHERE b.tenant = p_tenant AND b.kind = '' AND b.value = g.name AND b.scope = '' AND b.span = 'minute'
      AND b.first <= c.at AND b.at >= c.at;
    UPDATE repute_bucket b SET tokens = greatest(b.tokens - p_reserved, 0) + p_used
    FROM unnest(c.group_day) AS g(name)
    WHERE b.tenant = p_tenant AND b.kind = '' AND b.value = g.name AND b.scope = '' AND b.span = 'day'
      AND b.first <= c.at AND b.at >= c.at;
END
$$;
