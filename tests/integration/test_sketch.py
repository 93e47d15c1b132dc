"""
test_sketch.py - a limit counted in a count-min sketch (`sketch:`) through
`weir serve`: every client address admitted exactly its limit, none of
them a key of the store, the rule shown with its sketch, and a sketch's
denial charging nothing of the request's other limits.
"""

RULES = """\
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2, sketch: 1MiB}
  - key: route
    rate_limit: {unit: minute, requests_per_unit: 100}
"""


def test_each_address_its_limit_and_no_store_keys(weir_factory):
    w = weir_factory(RULES)
    for i in range(300):
        ip = f"198.51.{i // 256}.{i % 256}"
        codes = [w.get(f"/v1/check?domain=edge&remote_address={ip}").status for _ in range(3)]
        assert codes == [200, 200, 429], (ip, codes)
    assert w.metric("weir_store_keys") in (None, 0.0)
    assert "sketch_bytes=1048576" in w.rules_text()


def test_a_sketch_denial_charges_nothing_else(weir_factory):
    w = weir_factory(RULES)
    both = ({"remote_address": "203.0.113.9"}, {"route": "/r"})
    assert [w.check("edge", *both).status for _ in range(5)] == [200, 200, 429, 429, 429]
    r = w.check("edge", {"route": "/r"})
    assert r.status == 200 and r.json()["statuses"][0]["remaining"] == 97, r.json()
