# test_verdict.py — the Python binding as a caller uses it: decisions from
# dicts and from JSON agree, errors carry the code, path, line and column,
# many threads on one engine decide as one thread does, reloads under load,
# close, eval, and a snapshot written from Python replayed exactly by
# `verdict replay`.
#
# Run by bindings/python/run-tests.sh (CTest: bindings/python), with the
# module built into BUILD/python and VERDICT_BUILD_DIR naming the build.
import json
import os
import shutil
import subprocess
import threading

import pytest

import verdict

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("VERDICT_BUILD_DIR") or os.path.join(TOP, "build")
GATE = os.path.join(TOP, "tests", "engine", "bundles", "gate")

POLICY_A = """strategy: peer_gate
decision_points: [peer_gate]
actions:
  allow: true
  deny: false
  ask_mfa: {allowed: false, review: true}
constants:
  scanners: ["curl/8.4.0", "python-requests/2.31.0", "Go-http-client/1.1", "sqlmap/1.7", "masscan/1.3"]
rules:
  - name: cn-api
    if: country == "CN" && path.startsWith("/api/v1")
    action: allow
  - name: scanners
    if: ua in scanners
    action: deny
    reason: known scanner
  - name: low-score
    if: score < 0.6
    action: ask_mfa
default:
  action: allow
"""
# the same gate with the score threshold moved: some answers change
POLICY_B = POLICY_A.replace("score < 0.6", "score < 0.3")


def requests(n, seed=7):
    """n gate requests {country, path, ua, score}, the same every run."""
    state = seed
    def rnd():
        nonlocal state
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (state >> 33) / float(1 << 31)
    countries = ["CN", "US", "DE", "BR", "IN", "FR", "JP", "RU", "GB", "CN"]
    paths = ["/api/v1/users", "/api/v2/items", "/login", "/api/v1", "/health"]
    uas = ["curl/8.4.0", "sqlmap/1.7", "Mozilla/5.0 Firefox/128.0", "okhttp/4.12.0",
           "Mozilla/5.0 Safari/605.1.15", "Mozilla/5.0 Chrome/126.0"]
    out = []
    for _ in range(n):
        out.append({"action": "peer_gate", "context": {
            "country": countries[int(rnd() * len(countries))],
            "path": paths[int(rnd() * len(paths))] + ("/%d" % int(rnd() * 1000) if rnd() < 0.5 else ""),
            "ua": uas[int(rnd() * len(uas))],
            "score": int(rnd() * 10000) / 10000}})
    return out


def expected(req):
    c = req["context"]
    if c["country"] == "CN" and c["path"].startswith("/api/v1"):
        return "allow"
    if c["ua"] in ("curl/8.4.0", "python-requests/2.31.0", "Go-http-client/1.1", "sqlmap/1.7",
                   "masscan/1.3"):
        return "deny"
    return "ask_mfa" if c["score"] < 0.6 else "allow"


@pytest.fixture
def bundle(tmp_path):
    d = tmp_path / "bundle"
    d.mkdir()
    (d / "gate.yaml").write_text(POLICY_A)
    return d


@pytest.fixture
def engine():
    # store=False: the tests leave the source tree's bundle as it was
    with verdict.Engine(GATE, store=False) as e:
        yield e


def stable(d):
    x = d.to_dict()
    x.pop("latency_us")
    x.pop("snapshot_id")
    if "trace" in x:
        x["trace"].pop("ns")
    return x


def test_dict_and_json_agree(engine):
    contexts = [
        {"path": "/admin/x", "headers": {"user-agent": "Firefox"}, "body_size": 1,
         "env": {"country": "US"}},
        {"path": "/api/v1", "headers": {"user-agent": "SQLMap/1.7"}, "body_size": 2.5,
         "env": {"country": "CN"}},
        {"path": "/p", "headers": {"user-agent": "\u00e9t\u00e9 \"q\"\n"}, "body_size": 2**64 - 1,
         "env": {"country": "DE"}, "tags": [1, 2.0, True, None, (), {}]},
        {"path": "/api/x", "body_size": 10**30},
        {"probe": 1, "path": "/"},
    ]
    for ctx in contexts:
        for extra in ({}, {"candidates": ["route_eu", "allow"], "key": "vip-1"}):
            req = {"action": "gate", "context": ctx, **extra}
            a = engine.decide(req, trace=True)
            b = engine.decide(json.dumps(req), trace=True)
            c = engine.decide(json.dumps(req).encode(), trace=True)
            assert stable(a) == stable(b) == stable(c), ctx
    d = engine.decide({"action": "gate", "context": contexts[0]})
    assert (d.action, d.allowed, d.review, d.source, d.rule) == ("ask_mfa", False, True, "rule", "admin")
    assert d.reason == "admin area needs a second factor" and d.strategy == "gate"
    assert isinstance(d.confidence, float) and d.confidence == 1.0
    assert len(d.policy_version) == 64 and d.model_version is None and d.snapshot_id is None
    assert d.latency_us > 0 and d.trace is None and "trace" not in d.to_dict()
    assert engine.decide({"action": "gate"}).source in ("rule", "default", "error")


def raises(engine, req, code, path=None, says=None):
    with pytest.raises(verdict.Error) as ei:
        engine.decide(req)
    e = ei.value
    assert e.code == code, (e.code, e.message)
    if path is not None:
        assert e.path == path, e.message
    if says is not None:
        assert says in e.message and says in str(e)
    return e


def test_errors(engine):
    raises(engine, {"context": {}}, "request", "$.action", "no $.action")
    raises(engine, {"action": 5}, "request", "$.action", "must be a str")
    raises(engine, {"action": "gate", "contxt": {}}, "request", "$", "unknown request key 'contxt'")
    raises(engine, {"action": "gate", "context": []}, "request", "$.context", "must be a dict")
    raises(engine, {"action": "gate", "candidates": ["allow", 3]}, "request", "$.candidates[1]")
    raises(engine, {"action": "nope"}, "not_found", "$.action")
    raises(engine, {"action": "gate", "context": {"a": {"b": [1, {1, 2}]}}}, "request",
           "$.context.a.b[1]", "a value of type set")
    raises(engine, {"action": "gate", "context": {"a": {3: 1}}}, "request", "$.context.a",
           "a key of type int")
    raises(engine, {"action": "gate", "context": {"x": float("nan")}}, "request", "$.context.x",
           "NaN is not a JSON number")
    raises(engine, {"action": "gate", "context": {"s": "\ud800"}}, "request", "$.context.s",
           "not valid UTF-8")
    deep = []
    for _ in range(600):
        deep = [deep]
    raises(engine, {"action": "gate", "context": {"d": deep}}, "limit", None, "511 levels")
    loop = []
    loop.append(loop)
    raises(engine, {"action": "gate", "context": {"loop": loop}}, "limit")
    e = raises(engine, '{"action": "gate",\n  "context": {"a": tru}}', "json", "$.context.a")
    assert (e.line, e.column) == (2, 20) and e.errno < 0
    with pytest.raises(verdict.Error) as ei:
        engine.decide(42)
    assert ei.value.code == "invalid"
    with pytest.raises(verdict.Error) as ei:
        verdict.Engine(os.path.join(TOP, "tests", "engine", "bundles", "broken"), store=False)
    assert ei.value.code == "policy" and ei.value.line > 0 and ei.value.column > 0
    with pytest.raises(verdict.Error) as ei:
        verdict.eval("1 +")
    assert ei.value.code == "syntax" and ei.value.line == 1 and ei.value.column > 0
    with pytest.raises(verdict.Error) as ei:
        verdict.eval("a / 0", {"a": 1})
    assert ei.value.code == "eval"


def test_eval():
    assert verdict.eval("a + 1", {"a": 2}) == 3
    assert verdict.eval("x.startsWith('/api')", {"x": "/api/v1"}) is True
    assert verdict.eval("[1, 2].map(i, i * 2)") == [2, 4]
    assert verdict.eval("{'k': v}", {"v": None}) == {"k": None}


def test_threads(bundle):
    reqs = requests(4000)
    with verdict.Engine(str(bundle)) as e:
        single = [e.decide(r).action for r in reqs]
        assert single == [expected(r) for r in reqs]
        results = [None] * 8
        def work(i):
            results[i] = [e.decide(r).action for r in reqs]
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            assert r == single


def test_reload_under_load(bundle):
    reqs = requests(500)
    want_a = [expected(r) for r in reqs]
    with verdict.Engine(str(bundle)) as e:
        v1 = e.policy_version
        stop = threading.Event()
        errors, seen = [], set()
        def work():
            while not stop.is_set():
                for r in reqs[:50]:
                    try:
                        seen.add(e.decide(r).policy_version)
                    except verdict.Error as x:  # a reload never refuses a decision
                        errors.append(x)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        (bundle / "gate.yaml").write_text(POLICY_B)
        v2 = e.reload()
        (bundle / "gate.yaml").write_text("strategy: [broken")
        with pytest.raises(verdict.Error) as ei:
            e.reload()
        assert ei.value.code == "policy"
        assert e.policy_version == v2  # the loaded bundle keeps serving
        for _ in range(20):
            (bundle / "gate.yaml").write_text(POLICY_A if _ % 2 else POLICY_B)
            e.reload()
        stop.set()
        for t in threads:
            t.join()
        assert not errors and v1 != v2 and len(seen) == 2
        (bundle / "gate.yaml").write_text(POLICY_A)
        e.reload()
        assert [e.decide(r).action for r in reqs] == want_a


def test_close(bundle):
    e = verdict.Engine(str(bundle))
    assert not e.closed
    e.decide(requests(1)[0])
    e.close()
    assert e.closed
    e.close()  # again: nothing to do
    with pytest.raises(verdict.Error, match="closed"):
        e.decide(requests(1)[0])
    with pytest.raises(verdict.Error, match="closed"):
        e.reload()
    # closing while other threads decide: those running finish, later calls are refused
    e = verdict.Engine(str(bundle))
    reqs = requests(200)
    started = threading.Barrier(5)
    done = []
    def work():
        started.wait()
        n = 0
        try:
            while True:
                e.decide(reqs[n % len(reqs)])
                n += 1
        except verdict.Error as x:
            done.append((n, x.message))
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    for r in reqs:  # the others decide meanwhile
        e.decide(r)
    e.close()
    for t in threads:
        t.join()
    assert len(done) == 4 and all("closed" in m for _, m in done), done


def test_snapshots_replay(bundle, tmp_path):
    snaps = tmp_path / "snaps"
    reqs = requests(300)
    ids = []
    with verdict.Engine(str(bundle), snapshots=str(snaps), durability="always") as e:
        for i, r in enumerate(reqs):
            if i % 3 == 0:
                d = e.decide(json.dumps(r))
            else:
                r = dict(r, candidates=["allow", "deny", "ask_mfa"], key="k-%d" % i)
                d = e.decide(r)
            assert d.snapshot_id and len(d.snapshot_id) == 36
            ids.append(d.snapshot_id)
        # odd values too: unicode, big and negative numbers, nesting, empty containers
        d = e.decide({"action": "peer_gate", "context": {
            "country": "CN", "path": "/api/v1/\u00e9", "ua": "x\"y\\z\n", "score": 0.1,
            "n": [2**63, 2**64 - 1, -2**63, 10**30, 1.0, -0.0, 1e-300], "m": {"": {}, "a b": []}}})
        ids.append(d.snapshot_id)
        assert e.stats()["snapshots_written"] >= len(ids)
    assert len(set(ids)) == len(ids)
    out = subprocess.run([os.path.join(BUILD, "verdict"), "replay", "--snapshots", str(snaps),
                          "--json"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    text = json.dumps(report)
    assert report["replayed"] == len(ids), text
    assert report["reproduced"] == len(ids), text


def test_snapshots_off(bundle):
    with verdict.Engine(str(bundle), snapshots=False) as e:
        assert e.decide(requests(1)[0]).snapshot_id is None
        assert e.stats()["snapshots_on"] == 0
    with pytest.raises(verdict.Error) as ei:
        verdict.Engine(str(bundle), durability="sometimes")
    assert ei.value.code == "invalid"


def test_store(bundle, tmp_path):
    """The version store: the default keeps versions beside the bundle, False keeps
    none, a folder keeps them there."""
    with verdict.Engine(str(bundle), store=False) as e:
        e.decide(requests(1)[0])
    assert not (bundle / ".verdict").exists()
    kept = tmp_path / "kept"
    with verdict.Engine(str(bundle), store=str(kept)) as e:
        e.decide(requests(1)[0])
    assert not (bundle / ".verdict").exists()
    assert any(kept.iterdir())
    with verdict.Engine(str(bundle)) as e:
        e.decide(requests(1)[0])
    assert any((bundle / ".verdict" / "versions").iterdir())
    with pytest.raises(TypeError):
        verdict.Engine(str(bundle), store=3)
