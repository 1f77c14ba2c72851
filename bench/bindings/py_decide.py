#!/usr/bin/python3
# py_decide.py REQUESTS BUNDLE — the Python lane of bench/bindings: decides
# every request of REQUESTS (one JSON request a line, {"action": ...,
# "context": {country, path, ua, score}}; an "expect" member, the generator's
# answer, is checked and not sent) with the bundle in BUNDLE through the
# verdict module's decide(dict), snapshots off, and prints one line:
#   {"lane":"python decide(dict)","ns_per_decision":N,"cpu_ns_per_decision":C,"decisions":K}
# The requests are parsed into dicts before timing; N is the median of three
# timed passes after a warm-up pass (wall clock), C the process's CPU time in
# the same passes. The module is the one installed, else
# the one `make bindings` builds (build/python, or VERDICT_BUILD_DIR/python).
import json
import os
import sys
import time

try:
    import verdict
except ImportError:  # not installed: the module `make bindings` builds
    sys.path.insert(0, os.path.join(os.environ.get("VERDICT_BUILD_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build"), "python"))
    import verdict


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: py_decide.py REQUESTS BUNDLE")
    reqs, expect = [], []
    with open(sys.argv[1]) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                expect.append(r.pop("expect", None))
                reqs.append(r)
    with verdict.Engine(sys.argv[2], snapshots=False) as e:
        decide = e.decide
        got = [decide(r).action for r in reqs]  # warm-up, and the check
        wrong = [i for i, (g, w) in enumerate(zip(got, expect)) if w is not None and g != w]
        if wrong:
            i = wrong[0]
            sys.exit(f"py_decide.py: {len(wrong)} answers differ from expect, the first "
                     f"line {i + 1}: {got[i]} for {json.dumps(reqs[i])}, expected {expect[i]}")
        times, cpu = [], []
        for _ in range(3):
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            for r in reqs:
                decide(r)
            times.append((time.perf_counter_ns() - t0) / len(reqs))
            cpu.append((time.process_time_ns() - c0) / len(reqs))
    times.sort()
    cpu.sort()
    print(json.dumps({"lane": "python decide(dict)", "ns_per_decision": round(times[1]),
                      "cpu_ns_per_decision": round(cpu[1]),
                      "decisions": len(reqs)}, separators=(",", ":")))


if __name__ == "__main__":
    main()
