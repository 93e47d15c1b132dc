"""docs/API.md says what weir answers: every example there (a `curl` block
followed by its output) is sent to a weir serving examples/rules.yaml, and
the documented status line, headers and body must be what comes back; every
error text of its "Errors" table must be what the request that causes it
gets. Values that depend on the clock (reset times, Retry-After) are
compared by form."""
import json
import os
import re
import shlex

import pytest

import rawhttp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
API_MD = os.path.join(ROOT, "docs", "API.md")
RULES = os.path.join(ROOT, "examples", "rules.yaml")

# Values that move with the clock: compared as whole numbers only.
VOLATILE_HEADERS = {"x-ratelimit-reset", "retry-after"}
VOLATILE_KEYS = {"reset_after_ms", "retry_after_ms", "retry_after", "durationUntilReset"}
# A lease token's ids move with the clock: compared by form.
TOKEN = r"1(;\d+,\d+,\d+,[0-9a-f]+)*"


def examples():
    """(curl command, documented output) for each ```sh block holding a
    curl command that is followed at once by a ``` output block."""
    text = open(API_MD, encoding="utf-8").read()
    blocks = re.findall(r"```(\w*)\n(.*?)```\n?", text, re.S)
    found = []
    for (lang, body), (lang2, out) in zip(blocks, blocks[1:]):
        if lang == "sh" and body.lstrip().startswith("curl") and lang2 == "":
            found.append((body.strip(), out))
    return found


def parse_curl(cmd):
    """method, target, headers, body of a documented curl command."""
    args = shlex.split(cmd.replace("\\\n", " "))
    assert args[0] == "curl"
    method, headers, body, url = "GET", [], None, None
    i = 1
    while i < len(args):
        a = args[i]
        if a in ("-s", "-si", "-i"):
            pass
        elif a == "-H":
            i += 1
            k, v = args[i].split(":", 1)
            headers.append((k.strip(), v.strip()))
        elif a == "-d":
            i += 1
            body, method = args[i], "POST"
        else:
            url = a
        i += 1
    m = re.match(r"(?:http://)?localhost:8080(/.*)", url)
    assert m, url
    return method, m.group(1), headers, body


def parse_output(out):
    """(status line or None, [(name, value)], body text)."""
    if not out.startswith("HTTP/1.1"):
        return None, [], out.strip()
    head, _, body = out.partition("\n\n")
    lines = head.split("\n")
    headers = [tuple(x.strip() for x in line.split(":", 1)) for line in lines[1:]]
    return lines[0], headers, body.strip()


def same_json(doc, got, path="$"):
    if doc == "__ANY__":
        return
    if isinstance(doc, dict):
        assert isinstance(got, dict), f"{path}: {got!r}"
        assert list(doc) == list(got), f"{path}: keys {list(got)}, documented {list(doc)}"
        for k in doc:
            if k == "lease":
                assert re.fullmatch(TOKEN, got[k]) and got[k].count(";") == doc[k].count(";"), \
                    f"{path}.{k}: {got[k]!r}"
            elif k in VOLATILE_KEYS:
                assert type(got[k]) is type(doc[k]), f"{path}.{k}: {got[k]!r}"
            else:
                same_json(doc[k], got[k], f"{path}.{k}")
    elif isinstance(doc, list):
        assert isinstance(got, list) and len(got) == len(doc), f"{path}: {got!r}"
        for i, (d, g) in enumerate(zip(doc, got)):
            same_json(d, g, f"{path}[{i}]")
    else:
        assert doc == got, f"{path}: {got!r}, documented {doc!r}"


def same_header(name, doc, got):
    if name.lower() in VOLATILE_HEADERS:
        assert re.fullmatch(r"\d+", got), f"{name}: {got!r}"
    elif name.lower() == "weir-lease":
        assert re.fullmatch(TOKEN, got) and got.count(";") == doc.count(";"), f"{name}: {got!r}"
    elif name.lower() == "ratelimit":
        # t= moves with the clock
        assert re.sub(r";t=\d+", ";t=N", got) == re.sub(r";t=\d+", ";t=N", doc), \
            f"{name}: {got!r}, documented {doc!r}"
    else:
        assert got == doc, f"{name}: {got!r}, documented {doc!r}"


@pytest.fixture(scope="module")
def weir(weir_module_factory):
    return weir_module_factory(open(RULES).read())


def test_every_example_answers_as_documented(weir):
    cases = examples()
    assert len(cases) >= 4, "the examples of docs/API.md were not found"
    for cmd, out in cases:
        method, target, headers, body = parse_curl(cmd)
        status_line, doc_headers, doc_body = parse_output(out)
        # a denial is documented as what a client meets after spending
        # its limit: the request is sent again until its status comes
        for _ in range(10):
            r = weir.request(method, target, body, headers)
            if status_line is None or f"HTTP/1.1 {r.status} {r.reason}" == status_line:
                break
        if status_line:
            assert f"HTTP/1.1 {r.status} {r.reason}" == status_line, cmd
        for name, value in doc_headers:
            assert r.has(name), f"{cmd}: no {name} header"
            same_header(name, value, r.header(name))
        if doc_body:
            got = r.json()
            doc = json.loads(doc_body.replace("[...]", '"__ANY__"'))
            same_json(doc, got)


# The request that causes each error text of the "Errors" table.
POST_CHECK = ("POST", "/v1/check")
ERROR_REQUESTS = {
    "malformed JSON at line 1, column 16: string or '}' expected near end of file":
        POST_CHECK + ('{"domain":"api",',),
    "descriptors[0].entries[0].value: must be a string":
        POST_CHECK + ('{"domain":"api","descriptors":[{"entries":[{"key":"a","value":1}]}]}',),
    "descriptors[0].entries[0].value: 5000 bytes, more than the 4096 a string may have":
        POST_CHECK + ('{"domain":"api","descriptors":[{"entries":[{"key":"api_key","value":"'
                      + "v" * 5000 + '"}]}]}',),
    "rate limit domain must not be empty":
        POST_CHECK + ('{"domain":"","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}',),
    "rate limit descriptor list must not be empty":
        POST_CHECK + ('{"domain":"api","descriptors":[]}',),
    "missing query parameter 'domain'": ("GET", "/v1/check?api_key=k", None),
    "no descriptor entries: add them as query parameters (...)":
        ("GET", "/v1/check?domain=api", None),
    "descriptors[0].limit.unit must not be UNKNOWN":
        ("POST", "/json", '{"domain":"api","descriptors":[{"entries":[{"key":"api_key",'
                          '"value":"k"}],"limit":{"requestsPerUnit":1,"unit":"UNKNOWN"}}]}'),
    "unknown domain 'x'":
        POST_CHECK + ('{"domain":"x","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}',),
    "no such path: /x": ("GET", "/x", None),
    "method DELETE is not allowed on /v1/check (allowed: GET, HEAD, POST)":
        ("DELETE", "/v1/check", None),
}
# Texts of the table caused by raw HTTP framing or by what JSON cannot
# carry: the HTTP and engine tests cause those.
NOT_SENT_HERE = {"malformed request: ...", "missing Host header", "more than one Host header",
                 "whitespace between header name and colon",
                 "a line of the header section ends in LF without CR",
                 "more than one space between the parts of the request line",
                 "descriptors[0] has values too long for a counter key (4096 bytes with the rule's path)",
                 "descriptors[1] has an entry whose key or value is missing", "out of memory",
                 # with --allow-request-overrides false: test_api.py sends it
                 "descriptors[0].limit: this service does not take limits from requests",
                 "no decision within --decision-timeout"}


def error_table():
    text = open(API_MD, encoding="utf-8").read()
    section = text.split("## Errors", 1)[1]
    details = []
    for row in re.findall(r"^\| (\d[\d, ]*) \|[^|]*\|([^|\n]*)\|", section, re.M):
        details += re.findall(r"`([^`]+)`", row[1])
    return details


def test_every_error_text_is_what_weir_says(weir):
    details = error_table()
    assert len(details) >= 10, details
    for d in details:
        if d in NOT_SENT_HERE:
            continue
        assert d in ERROR_REQUESTS, f"docs/API.md lists {d!r}: add the request causing it"
        method, target, body = ERROR_REQUESTS[d]
        r = weir.request(method, target, body)
        assert r.status in (400, 404, 405), (d, r.status)
        got = r.json()["detail"]
        if d.endswith("(...)"):
            assert got.startswith(d[:-len("(...)")]), (got, d)
        else:
            assert got == d, (got, d)


def test_api_md_is_found_by_the_tests():
    # the extraction itself must see the blocks it checks
    cmds = [c for c, _ in examples()]
    assert any("/v1/check?domain=api&path=/login" in c for c in cmds)
    assert any("/json" in c for c in cmds)
    assert any("/v1/check/batch" in c for c in cmds)
