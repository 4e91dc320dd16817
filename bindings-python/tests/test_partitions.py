"""The partition map of partitioned servers: the same partition for a
context and a lease id as the server computes (the host's pinned values),
and typed refusals naming the argument."""

from __future__ import annotations

import pytest

import repute


def test_a_context_and_a_lease_id_name_the_partition_a_server_sends_them_to() -> None:
    sites = ["shop.example", "news.example", "api.example", "search.example"]
    assert [repute.partition_of(s, 3) for s in sites] == [1, 2, 2, 1]
    assert [repute.partition_of(s, 4) for s in sites] == [1, 2, 3, 1]
    assert repute.partition_of("anything", 1) == 0
    # Owner epoch 2 of partition 1 of 3 hands out ids from (2 * 3 + 1) << 32.
    floor = 7 << 32
    assert repute.lease_partition(floor, 3) == 1
    assert repute.lease_partition(floor + 5, 3) == 1


@pytest.mark.parametrize("partitions", [0, 65])
def test_a_count_out_of_range_is_refused_naming_it(partitions: int) -> None:
    with pytest.raises(repute.InvalidInputError) as refused:
        repute.partition_of("shop.example", partitions)
    assert refused.value.field == "partitions"
    with pytest.raises(repute.InvalidInputError) as refused:
        repute.lease_partition(1, partitions)
    assert refused.value.field == "partitions"
