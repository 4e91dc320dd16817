-- One log, one state: a grant is judged against registrations and groups
-- no older than the log's last change of them. `changed_seq` is the log
-- position of the tenant's last entry that changes what a grant is judged
-- against (a registration, an unregister, a group's limits), written with
-- the entry's append; a grant names the position its process folded, and
-- is refused as stale while it is behind.
ALTER TABLE repute_tenant ADD COLUMN changed_seq bigint NOT NULL DEFAULT 0;

-- repute_claimed_grant, refused as ('stale', NULL, NULL) when `p_view` is
-- behind the tenant's `changed_seq`; nothing is locked, granted or counted then.
CREATE FUNCTION repute_viewed_grant(
    p_view bigint,
    p_tenant text, p_kind text, p_value text, p_permit integer, p_last bigint, p_ttl bigint, p_epoch bigint,
    p_rpm integer, p_tpm bigint, p_gap bigint, p_max_uses bigint, p_cost bigint,
    p_context text, p_crpm integer, p_ctpm bigint, p_cgap bigint,
    p_rpd integer, p_tpd bigint, p_groups text[], p_grpm integer[], p_gtpm bigint[], p_ggap bigint[],
    p_grpd integer[], p_gtpd bigint[], p_gconcurrency integer[])
RETURNS TABLE (status text, found bigint, grp integer) LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce((SELECT t.changed_seq FROM repute_tenant t WHERE t.tenant = p_tenant), 0) > p_view THEN
        RETURN QUERY SELECT 'stale'::text, NULL::bigint, NULL::integer;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM repute_claimed_grant(
        p_tenant, p_kind, p_value, p_permit, p_last, p_ttl, p_epoch, p_rpm, p_tpm, p_gap, p_max_uses, p_cost,
        p_context, p_crpm, p_ctpm, p_cgap, p_rpd, p_tpd, p_groups, p_grpm, p_gtpm, p_ggap, p_grpd, p_gtpd,
        p_gconcurrency);
END
$$;
