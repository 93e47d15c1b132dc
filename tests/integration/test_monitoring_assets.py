"""
test_monitoring_assets.py - examples/grafana/weir.json and
examples/prometheus/alerts.yml against what weir really exports.

The dashboard must parse, and each of its panels have a title, a
datasource and queries; the alert rules must have an alert name, an
expression, a `for:`, a severity and their annotations. Every metric name
either queries, and every label they match on, group by or print, is
looked up in the /metrics of real daemons: one on the memory store with
the quota database and the admin API (the weir_quota_* series), one on a
real redis-server (weir_redis_*) and one on a real Redis Cluster of three
masters (weir_redis_node_*, weir_redis_cluster_*). PromQL is read by a
small tokenizer of its own (below): strings, label matchers {...},
ranges [5m], by/without/on/ignoring lists and function names are told
apart from metric names. With promtool on the PATH (Debian's prometheus
package), `promtool check rules` must pass on the alerts and on the
dashboard's queries too (their Grafana variables replaced); without it
that part is skipped and the checks here are the gate.

Each daemon names its store, so the test runs once (tests/CMakeLists.txt
leaves it out of the second store's run).
"""

import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from redis_cluster import RedisCluster
from redis_server import RedisServer
from test_admin import token_file

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
DASHBOARD = os.path.join(ROOT, "examples", "grafana", "weir.json")
ALERTS = os.path.join(ROOT, "examples", "prometheus", "alerts.yml")
OPERATIONS = os.path.join(ROOT, "docs", "OPERATIONS.md")

# Labels Prometheus adds to every series it scrapes, and its own series.
TARGET_LABELS = {"instance", "job"}
PROMETHEUS_SERIES = {"up": {"instance", "job"}}

# Labels whose values are a fixed set weir always prints (docs/OPERATIONS.md,
# "Metrics"): a matcher on them must name values that exist.
FIXED_LABELS = {"result", "mode", "protocol"}

# ------------------------------------------------------------------ PromQL

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_count", "histogram_sum", "histogram_fraction", "histogram_quantile",
    "histogram_stddev", "histogram_stdvar", "holt_winters", "hour", "idelta", "increase",
    "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month",
    "predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt",
    "time", "timestamp", "vector", "year", "avg_over_time", "min_over_time", "max_over_time",
    "sum_over_time", "count_over_time", "quantile_over_time", "stddev_over_time",
    "stdvar_over_time", "last_over_time", "present_over_time", "acos", "acosh", "asin",
    "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh", "tan", "tanh", "deg", "rad", "pi",
    "start", "end",  # the @ modifier's
}
BINARY_KEYWORDS = {"and", "or", "unless", "atan2", "bool", "offset"}
LABEL_LISTS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
GROUPING = {"by", "without"}

IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                    r"(?:(?:ms|[smhdwy])(?:[0-9]+(?:ms|[smhdwy]))*)?")
DURATION = re.compile(r"(?:[0-9]+(?:ms|[smhdwy]))+")
VARIABLE = re.compile(r"\$(?:\{[a-zA-Z0-9_:.]+\}|[a-zA-Z0-9_]+)")
OPERATORS = ("==", "!=", ">=", "<=", "=~", "!~", "+", "-", "*", "/", "%", "^", "<", ">", ",",
             "@")


class PromQLError(ValueError):
    pass


class Selector:
    def __init__(self, name):
        self.name = name
        self.matchers = []  # (label, op, value)


class Query:
    """What a PromQL expression names: its selectors (metric name and
    matchers), functions, and the labels of its by/without/on/... lists."""

    def __init__(self):
        self.selectors = []
        self.functions = []
        self.grouping = []  # (keyword, [labels])


def _string(expr, i):
    """The end (past the quote) and the value of the string at @i."""
    quote = expr[i]
    j = i + 1
    out = []
    while j < len(expr):
        c = expr[j]
        if c == "\\" and quote != "`":
            if j + 1 >= len(expr):
                break
            out.append(expr[j + 1])
            j += 2
            continue
        if c == quote:
            return j + 1, "".join(out)
        out.append(c)
        j += 1
    raise PromQLError(f"unterminated string at {i}: {expr[i:i + 30]!r}")


def _skip_space(expr, i):
    while i < len(expr):
        if expr[i].isspace():
            i += 1
        elif expr[i] == "#":
            while i < len(expr) and expr[i] != "\n":
                i += 1
        else:
            break
    return i


def _matchers(expr, i):
    """Parses {label op "value", ...} from @i (at '{'); returns the end and
    the matchers."""
    out = []
    i = _skip_space(expr, i + 1)
    while True:
        if i < len(expr) and expr[i] == "}":
            return i + 1, out
        m = LABEL.match(expr, i)
        if not m:
            raise PromQLError(f"label name expected at {i}: {expr[i:i + 30]!r}")
        label = m.group()
        i = _skip_space(expr, m.end())
        op = next((o for o in ("=~", "!~", "!=", "=") if expr.startswith(o, i)), None)
        if not op:
            raise PromQLError(f"matcher operator expected after {label!r}")
        i = _skip_space(expr, i + len(op))
        if i >= len(expr) or expr[i] not in "\"'`":
            raise PromQLError(f"a string expected as {label!r}'s value")
        i, value = _string(expr, i)
        out.append((label, op, value))
        i = _skip_space(expr, i)
        if i < len(expr) and expr[i] == ",":
            i = _skip_space(expr, i + 1)
        elif i >= len(expr) or expr[i] != "}":
            raise PromQLError(f"',' or '}}' expected at {i}: {expr[i:i + 30]!r}")


def _label_list(expr, i, keyword):
    """Parses (label, ...) after by/without/on/... at @i (at '(')."""
    end = expr.find(")", i)
    if end < 0:
        raise PromQLError(f"unclosed label list after {keyword}")
    labels = [s.strip() for s in expr[i + 1:end].split(",") if s.strip()]
    for label in labels:
        if not LABEL.fullmatch(label):
            raise PromQLError(f"{keyword} ({expr[i + 1:end]}): {label!r} is not a label name")
    return end + 1, labels


def parse_promql(expr, grafana=False):
    """A Query of @expr; PromQLError when it is not PromQL as far as a
    tokenizer can tell (unknown functions, unbalanced brackets, bad
    matchers or ranges). @grafana admits Grafana's $variables."""
    q = Query()
    stack = []
    last = None  # kind of the previous token: "selector", "value", "op", "open"
    i = 0
    n = len(expr)
    while True:
        i = _skip_space(expr, i)
        if i >= n:
            break
        c = expr[i]
        if c in "\"'`":
            i, _ = _string(expr, i)
            last = "value"
        elif c == "{":
            if last == "selector":
                sel = q.selectors[-1]
            else:  # {__name__="..."} or a selector without a name
                sel = Selector(None)
                q.selectors.append(sel)
            i, ms = _matchers(expr, i)
            sel.matchers += ms
            for label, op, value in ms:
                if label == "__name__" and op == "=":
                    sel.name = value
            last = "value"
        elif c == "[":
            end = expr.find("]", i)
            if end < 0:
                raise PromQLError(f"unclosed range at {i}")
            body = expr[i + 1:end].strip()
            parts = body.split(":")
            if len(parts) > 2 or not parts[0]:
                raise PromQLError(f"bad range [{body}]")
            for part in parts:
                part = part.strip()
                if not part and len(parts) == 2:
                    continue  # [5m:]: the default resolution
                if DURATION.fullmatch(part):
                    continue
                if grafana and VARIABLE.fullmatch(part):
                    continue
                raise PromQLError(f"bad duration {part!r} in [{body}]")
            i = end + 1
            last = "value"
        elif c == "$":
            m = VARIABLE.match(expr, i)
            if not grafana or not m:
                raise PromQLError(f"a variable outside Grafana at {i}: {expr[i:i + 20]!r}")
            i = m.end()
            last = "value"
        elif c in "(":
            stack.append("(")
            i += 1
            last = "open"
        elif c == ")":
            if not stack:
                raise PromQLError(f"unbalanced ')' at {i}")
            stack.pop()
            i += 1
            last = "value"
        elif c.isdigit() or (c == "." and i + 1 < n and expr[i + 1].isdigit()):
            m = NUMBER.match(expr, i)
            i = m.end()
            if i < n and (expr[i].isalnum() or expr[i] == "_"):
                raise PromQLError(f"bad number at {m.start()}: {expr[m.start():i + 5]!r}")
            last = "value"
        elif IDENT.match(expr, i):
            m = IDENT.match(expr, i)
            word = m.group()
            i = m.end()
            j = _skip_space(expr, i)
            follows_paren = j < n and expr[j] == "("
            nxt = IDENT.match(expr, j)
            if word in LABEL_LISTS:
                if word in ("group_left", "group_right") and not follows_paren:
                    last = "op"
                    continue
                if not follows_paren:
                    raise PromQLError(f"{word} without its label list")
                i, labels = _label_list(expr, j, word)
                q.grouping.append((word, labels))
                last = "op" if word not in GROUPING else "agg"
            elif follows_paren or (word in AGGREGATIONS and nxt and nxt.group() in GROUPING):
                if word not in FUNCTIONS and word not in AGGREGATIONS:
                    raise PromQLError(f"unknown function {word}()")
                q.functions.append(word)
                last = "agg"
            elif word in BINARY_KEYWORDS:
                last = "op"
            elif word.lower() in ("inf", "nan"):
                last = "value"
            else:
                q.selectors.append(Selector(word))
                last = "selector"
        else:
            op = next((o for o in OPERATORS if expr.startswith(o, i)), None)
            if not op:
                raise PromQLError(f"unexpected {c!r} at {i}: {expr[i:i + 30]!r}")
            i += len(op)
            last = "op"
    if stack:
        raise PromQLError("unbalanced '('")
    if not q.selectors:
        raise PromQLError("no series selected")
    for sel in q.selectors:
        if not sel.name:
            raise PromQLError("a selector without a metric name")
    return q


# ------------------------------------------------------------------ /metrics


class Exported:
    """Series names, their types, labels and label values, gathered from
    the /metrics of real daemons (several pages merged)."""

    def __init__(self):
        self.types = {}  # name in # TYPE -> type
        self.samples = {}  # sample name -> {label: set(values)}
        self.seen_on = {}  # name -> set of daemon kinds

    def add_page(self, text, kind):
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                _, _, name, typ = line.split(" ", 3)
                self.types[name] = typ
                self.seen_on.setdefault(name, set()).add(kind)
                continue
            if not line or line.startswith("#"):
                continue
            m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
            assert m, f"bad metrics line {line!r}"
            labels = self.samples.setdefault(m.group(1), {})
            for label, value in re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""):
                labels.setdefault(label, set()).add(value)
            self.seen_on.setdefault(m.group(1), set()).add(kind)

    def series_names(self):
        """The names a query can select: every sample's, and every name a
        TYPE line announces, except a histogram's or summary's own (its
        series are _bucket, _sum and _count)."""
        names = set(self.samples)
        for name, typ in self.types.items():
            if typ in ("histogram", "summary"):
                names |= {name + s for s in ("_bucket", "_sum", "_count")}
            else:
                names.add(name)
        return names

    def family(self, name):
        """The metric a series belongs to (a histogram for its _bucket)."""
        for s in ("_bucket", "_sum", "_count"):
            base = name[:-len(s)]
            if name.endswith(s) and self.types.get(base) in ("histogram", "summary"):
                return base
        return name

    def labels_of(self, name):
        """The labels of @name's series, None when none was printed."""
        if name in PROMETHEUS_SERIES:
            return set(PROMETHEUS_SERIES[name])
        if name not in self.samples:
            return None
        return set(self.samples[name]) | TARGET_LABELS


def check_query(expr, exported, grafana=False, where=""):
    """Problems of @expr against @exported (a list of strings), and its
    Query. A problem: an unknown metric name; a histogram's own name; a
    label matched or grouped by that no selected series has; a value of a
    fixed label that none has."""
    problems = []
    try:
        q = parse_promql(expr, grafana=grafana)
    except PromQLError as e:
        return [f"{where}: {e}: {expr}"], None
    names = exported.series_names() | set(PROMETHEUS_SERIES)
    all_labels = set(TARGET_LABELS)
    for sel in q.selectors:
        if sel.name not in names:
            if exported.types.get(sel.name) in ("histogram", "summary"):
                problems.append(f"{where}: {sel.name} is a histogram: select its _bucket, "
                                f"_sum or _count")
            else:
                problems.append(f"{where}: no metric {sel.name!r} in weir's /metrics")
            continue
        labels = exported.labels_of(sel.name)
        if labels is None:
            continue  # announced (TYPE), with no series yet: nothing to check against
        all_labels |= labels
        for label, op, value in sel.matchers:
            if label == "__name__":
                continue
            if label not in labels:
                problems.append(f"{where}: {sel.name} has no label {label!r} "
                                f"(it has {sorted(labels)})")
            elif label in FIXED_LABELS and "$" not in value:
                have = exported.samples[sel.name][label]
                wanted = value.split("|") if op in ("=~", "!~") else [value]
                for v in wanted:
                    if v not in have:
                        problems.append(f"{where}: {sel.name}{{{label}{op}{value!r}}}: no value "
                                        f"{v!r} (there are {sorted(have)})")
    for keyword, labels in q.grouping:
        for label in labels:
            if label not in all_labels:
                problems.append(f"{where}: {keyword} ({label}): no series of this query has "
                                f"that label")
    return problems, q


def result_labels(q, exported):
    """The labels the series of @q's result may carry, roughly: those of
    its `by` lists when it aggregates (minus le after histogram_quantile),
    else those of the series it selects."""
    aggregates = any(f in AGGREGATIONS for f in q.functions)
    if aggregates:
        labels = set()
        for keyword, ls in q.grouping:
            if keyword == "by":
                labels |= set(ls)
        if "histogram_quantile" in q.functions:
            labels.discard("le")
        return labels
    labels = set()
    for sel in q.selectors:
        labels |= exported.labels_of(sel.name) or set()
    return labels


# ------------------------------------------------------------------ daemons

RULES = """\
domain: api
tenants:
  key: api_key
  default_tier: free
  tiers:
    free:
      rate_limit: {unit: minute, requests_per_unit: 1000}
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
"""


def traffic(w):
    """Allowed, denied and shadow decisions, a refused request and a 404,
    so that their series have labels to check against."""
    for _ in range(3):
        r = w.check("api", {"user": "alice"}, {"trial": "t"}, {"api_key": "k1"})
        assert r.status in (200, 429), r
    assert w.check("", {"user": "alice"}).status == 400
    assert w.get("/nowhere").status == 404


@pytest.fixture(scope="module")
def exported(weir_module_factory, tmp_path_factory):
    """The /metrics pages of weir on the memory store (with the quota
    database and the admin API), on a real Redis and on a real Redis
    Cluster, merged."""
    out = Exported()
    tmp = tmp_path_factory.mktemp("monitoring")
    w = weir_module_factory(RULES, "--store", "memory", "--admin", "127.0.0.1:0",
                            "--admin-token-file", token_file(tmp),
                            "--quota-db", f"sqlite://{tmp}/quotas.db")
    traffic(w)
    w.wait_until(lambda: w.metric("weir_quota_db_up") == 1, timeout=10,
                 what="the quota database read")
    out.add_page(w.metrics_text(), "memory")

    redis = RedisServer(tmp / "redis").start()
    cluster = RedisCluster(tmp / "cluster", masters=3, replicas=0)
    try:
        w = weir_module_factory(RULES, "--store", redis.url, "--redis-timeout", "1s")
        traffic(w)
        assert w.metric("weir_redis_breaker_state") == 0
        out.add_page(w.metrics_text(), "redis")

        cluster.start()
        w = weir_module_factory(RULES, "--store", cluster.seeds(), "--redis-timeout", "1s")
        traffic(w)
        w.wait_until(lambda: "weir_redis_node_breaker_state{" in w.metrics_text(), timeout=10,
                     what="the masters' breakers in /metrics")
        out.add_page(w.metrics_text(), "redis-cluster")
        # the daemons stop (and are checked) before their stores do
        weir_module_factory.finish_all()
    finally:
        cluster.stop()
        redis.stop()
    return out


# ------------------------------------------------------------------ the dashboard


@pytest.fixture(scope="module")
def dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def query_panels(dashboard):
    """Every panel but rows and text, nested ones included."""
    out = []

    def walk(panels):
        for p in panels:
            if p.get("type") == "row":
                walk(p.get("panels", []))
            elif p.get("type") != "text":
                out.append(p)

    walk(dashboard["panels"])
    return out


def dashboard_queries(dashboard):
    """(where, expr, legendFormat) of every target."""
    return [(f"panel {p.get('title')!r} target {t.get('refId')}", t["expr"],
             t.get("legendFormat", ""))
            for p in query_panels(dashboard) for t in p.get("targets", [])]


def test_dashboard_shape(dashboard):
    assert dashboard["schemaVersion"] >= 37
    assert dashboard["title"] and dashboard["uid"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    assert variables["domain"]["query"] == "label_values(weir_decisions_total, domain)"
    ids = []
    panels = query_panels(dashboard)
    assert len(panels) >= 20
    for p in panels:
        where = f"panel {p.get('id')} {p.get('title')!r}"
        assert p.get("title"), f"{where}: no title"
        assert p.get("datasource") == {"type": "prometheus", "uid": "${datasource}"}, where
        assert p.get("targets"), f"{where}: no targets"
        for t in p["targets"]:
            assert t.get("expr", "").strip() and t.get("refId"), f"{where}: {t}"
            assert t.get("datasource", p["datasource"]) == p["datasource"], where
        assert len({t["refId"] for t in p["targets"]}) == len(p["targets"]), where
    for p in dashboard["panels"]:
        ids.append(p["id"])
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    texts = [p for p in dashboard["panels"] if p.get("type") == "text"]
    assert texts, "no text panel"
    content = " ".join(p["options"]["content"] for p in texts)
    assert "admin API" in content and "docs/QUOTAS.md" in content
    assert "/admin/v1/usage/" in content


def test_dashboard_queries_name_what_weir_exports(dashboard, exported):
    problems = []
    queries = dashboard_queries(dashboard)
    for v in dashboard["templating"]["list"]:
        if v["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", v["query"])
        assert m, f"variable {v['name']}: {v['query']}"
        queries.append((f"variable {v['name']}", m.group(1), "{{%s}}" % m.group(2)))
    for where, expr, legend in queries:
        found, q = check_query(expr, exported, grafana=True, where=where)
        problems += found
        if q is None or found:
            continue
        labels = result_labels(q, exported)
        for label in re.findall(r"\{\{\s*(\w+)\s*\}\}", legend):
            if label not in labels:
                problems.append(f"{where}: legend {{{{{label}}}}} is not a label of the result "
                                f"({sorted(labels)})")
    assert not problems, "\n".join(problems)


# ------------------------------------------------------------------ the alert rules


@pytest.fixture(scope="module")
def alert_rules():
    with open(ALERTS) as f:
        doc = yaml.safe_load(f)
    assert isinstance(doc, dict) and set(doc) == {"groups"}, "only groups at the top"
    rules = []
    names = set()
    for g in doc["groups"]:
        assert g.get("name") and g["name"] not in names, g.get("name")
        names.add(g["name"])
        assert g.get("rules"), f"group {g['name']} has no rules"
        rules += g["rules"]
    return rules


def operations_headings():
    with open(OPERATIONS) as f:
        return {m.group(1).strip() for m in re.finditer(r"^#+ (.+)$", f.read(), re.M)}


def test_alert_rules_shape(alert_rules):
    headings = operations_headings()
    seen = set()
    for r in alert_rules:
        name = r.get("alert")
        assert name and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", name), r
        assert name not in seen, f"{name} twice"
        seen.add(name)
        assert set(r) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}, r
        assert isinstance(r.get("expr"), str) and r["expr"].strip(), name
        assert "for" in r and DURATION.fullmatch(str(r["for"])), f"{name}: for: {r.get('for')}"
        assert r["labels"]["severity"] in ("critical", "warning", "info"), name
        a = r["annotations"]
        assert a.get("summary") and a.get("description"), name
        m = re.fullmatch(r'docs/OPERATIONS\.md, "([^"]+)"', a.get("runbook", ""))
        assert m, f"{name}: runbook {a.get('runbook')!r}"
        assert m.group(1) in headings, f"{name}: no section {m.group(1)!r} in docs/OPERATIONS.md"
    want = {"WeirDown", "WeirDeniedSpike", "WeirRedisBreakerOpen", "WeirRedisNodeBreakerOpen",
            "WeirFailOpenDecisions", "WeirFailureModeDecisions", "WeirRuleReloadFailed",
            "WeirDecisionLatencyHigh", "WeirQuotaTableStale", "WeirQuotaDatabaseDown"}
    assert want <= seen, f"missing {sorted(want - seen)}"
    with open(OPERATIONS) as f:
        docs = f.read()
    for name in seen:
        assert f"`{name}`" in docs, f"{name} is not described in docs/OPERATIONS.md"


def test_alert_rules_name_what_weir_exports(alert_rules, exported):
    problems = []
    for r in alert_rules:
        where = f"alert {r['alert']}"
        found, q = check_query(r["expr"], exported, where=where)
        problems += found
        if q is None or found:
            continue
        labels = result_labels(q, exported)
        for text in r["annotations"].values():
            for label in re.findall(r"\$labels\.(\w+)", text):
                if label not in labels:
                    problems.append(f"{where}: $labels.{label} is not a label of the result "
                                    f"({sorted(labels)})")
    assert not problems, "\n".join(problems)


def test_every_name_is_documented(dashboard, alert_rules):
    """Each metric the assets use is described in docs/OPERATIONS.md."""
    with open(OPERATIONS) as f:
        docs = f.read()
    names = set()
    for _, expr, _ in dashboard_queries(dashboard):
        names |= {s.name for s in parse_promql(expr, grafana=True).selectors}
    for r in alert_rules:
        names |= {s.name for s in parse_promql(r["expr"]).selectors}
    names -= set(PROMETHEUS_SERIES)
    for suffix in ("_bucket", "_sum", "_count"):
        names = {n[:-len(suffix)] if n.startswith("weir_request_duration") and n.endswith(suffix)
                 else n for n in names}
    # the metrics table writes a family's other members by their tail:
    # `ratelimit_service_rate_limit_total_hits`, `_over_limit`, ...
    full = set(re.findall(r"`([a-z][a-z0-9_]*)[`{]", docs))
    tails = set(re.findall(r"`(_[a-z0-9_]+)`", docs))

    def documented(name):
        return name in full or any(
            name.endswith(t) and any(f.startswith(name[:-len(t)] + "_") for f in full)
            for t in tails)

    missing = sorted(n for n in names if not documented(n))
    assert not missing, f"not in docs/OPERATIONS.md: {missing}"


# ------------------------------------------------------------------ promtool


def grafana_to_promql(expr):
    """A dashboard query as Prometheus would run it: Grafana's variables
    replaced by what they stand for."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__range", "6h")
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def test_promtool_check_rules(dashboard, tmp_path):
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool is not installed (Debian's prometheus package): the rules and "
                    "queries were checked by this file's own PromQL reader only")
    r = subprocess.run([promtool, "check", "rules", ALERTS], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    # the dashboard's queries, as recording rules
    rules = [{"record": f"weir:dashboard:q{i}", "expr": grafana_to_promql(expr)}
             for i, (_, expr, _) in enumerate(dashboard_queries(dashboard))]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    r = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# ------------------------------------------------------------------ the checker itself


def test_the_checker_finds_mistakes(exported):
    """The checks above can fail: each mistake here is found."""
    ok = 'sum by (domain) (rate(weir_decisions_total{result="denied"}[5m]))'
    assert check_query(ok, exported)[0] == []
    bad = {
        'rate(weir_decision_total[5m])': "no metric 'weir_decision_total'",
        'histogram_quantile(0.99, sum by (le) (rate(weir_request_duration_seconds[5m])))':
            "is a histogram",
        'rate(weir_decisions_total{reslt="denied"}[5m])': "no label 'reslt'",
        'rate(weir_decisions_total{result="deny"}[5m])': "no value 'deny'",
        'sum by (domian) (rate(weir_decisions_total[5m]))': "by (domian)",
        'rates(weir_decisions_total[5m])': "unknown function rates()",
        'rate(weir_decisions_total[5x])': "bad duration",
        'rate(weir_decisions_total[$__rate_interval])': "bad duration",
        'sum(rate(weir_decisions_total[5m])': "unbalanced",
        'rate(weir_decisions_total{result="denied}[5m])': "unterminated string",
        'weir_redis_node_breaker_stat > 0': "no metric 'weir_redis_node_breaker_stat'",
    }
    for expr, why in bad.items():
        problems, _ = check_query(expr, exported)
        assert any(why in p for p in problems), f"{expr}: {problems}"
    # what must not be taken for metric names
    q = parse_promql('sum without (rule) (increase(weir_failopen_total{domain=~"a|b"}[1h] '
                     'offset 5m)) > 2 * on (domain) group_left (x) weir_quota_tenants '
                     'and 1e3 < bool inf', grafana=False)
    assert [s.name for s in q.selectors] == ["weir_failopen_total", "weir_quota_tenants"]
    q = parse_promql('rate(weir_decisions_total{domain=~"$domain"}[$__rate_interval])',
                     grafana=True)
    assert [s.name for s in q.selectors] == ["weir_decisions_total"]
    # the Redis-only series come from the Redis daemons, the others from memory
    assert exported.seen_on["weir_redis_breaker_state"] == {"redis", "redis-cluster"}
    assert exported.seen_on["weir_redis_node_breaker_state"] == {"redis-cluster"}
    assert "memory" in exported.seen_on["weir_store_bytes"]
    assert "memory" in exported.seen_on["weir_quota_snapshot_age_seconds"]
