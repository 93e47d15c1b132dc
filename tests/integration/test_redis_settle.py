"""
test_redis_settle.py - costs settled afterwards on Redis, exactly as on
the memory store (test_settle.py's sequence), and across two instances:
a request decided on one is settled on the other.
"""
from redis_server import redis_factory  # noqa: F401  (a fixture)
from test_settle import RULES, check, remaining, run_settlements, settle

PATIENT = ("--redis-timeout", "1s")


def test_refund_and_overrun_on_redis(weir_factory, redis_factory):
    rd = redis_factory()
    run_settlements(weir_factory(RULES, "--store", rd.url, *PATIENT))


def test_settled_on_another_instance(weir_factory, redis_factory):
    rd = redis_factory()
    a, b = (weir_factory(RULES, "--store", rd.url, *PATIENT) for _ in range(2))
    assert check(a, "t", 9000).status == 200
    assert settle(b, "t", 9000, 10).status == 200
    assert remaining(a, "t") == {"tokens_per_minute": 99990, "tokens_bucket": 999990}
