"""The SparkSession settings ``register()`` gives a session: set where the user set none, kept where they did."""
from __future__ import annotations

from typing import Any

from kafka_kip.spark.session import ARROW_MAX_BYTES_PER_BATCH, UNMEASURED, apply_defaults


def test_register_turns_off_sparks_per_row_arrow_batch_measuring(spark: Any) -> None:
    # Spark's default is 64 MiB (measured after every row); the session fixture only called register()
    assert UNMEASURED == '2147483647'
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == UNMEASURED


def test_a_value_the_user_set_is_kept(spark: Any) -> None:
    spark.conf.set(ARROW_MAX_BYTES_PER_BATCH, '1048576')
    try:
        assert apply_defaults(spark) == {}
        assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == '1048576'
    finally:
        spark.conf.unset(ARROW_MAX_BYTES_PER_BATCH)
    assert apply_defaults(spark) == {ARROW_MAX_BYTES_PER_BATCH: UNMEASURED}
    assert spark.conf.get(ARROW_MAX_BYTES_PER_BATCH) == UNMEASURED
