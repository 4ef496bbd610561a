#!/usr/bin/python3
"""pmrkit_interleaved reports what it ran, in the direction it says, and refuses bad input.

    test_interleaved.py build/bench/pmrkit_interleaved

Checks:
  - with --workload Map, only Map runs; the reference's row shows its median time per phase,
    every other subject's row a ratio per phase with (rounds faster / rounds) and a p value;
  - the ratio is the subject's time over the reference's: `checked` (which validates every
    call and quarantines what is freed) builds and destroys the map far slower than
    mimalloc_plain, so its ratios are well above 1 (2.9x and 17x when written); read the other
    way round they would be below 1;
  - a /fresh subject, a /shared one (a new resource per op over a pool that outlives the ops)
    and a pooled monotonic one (released between ops) all run;
  - --json FILE writes what the table shows: per workload each subject's median seconds per
    phase and, past the reference, the same ratios, rounds faster and slower, and p as the
    text, and every round's ratio (whose median and count below 1 are those); a path it
    cannot write exits 1 with the reason, before any op runs;
  - an unknown strategy, --rounds 0, an unknown workload and a single subject each exit with
    status 2 and a message that says what is allowed, before any op runs.
Times are never compared with a bound; only a ratio of several times is.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(tool, *args):
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=100)


def check_json(path, text, rows):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    check(doc.get("rounds") == 3 and doc.get("reference") == "mimalloc_plain"
          and doc.get("phases") == ["build", "read", "destroy"],
          f"the JSON names its rounds, reference and phases: {doc}")
    workloads = doc.get("workloads", [])
    check([w["name"] for w in workloads] == ["Map"], "the JSON holds the Map workload only")
    if not workloads:
        return
    subjects = workloads[0]["subjects"]
    check([s["name"] for s in subjects] == ["mimalloc_plain", "checked", "size_class/fresh",
                                            "size_class/shared", "monotonic"],
          "the JSON's subjects, in order")
    ref = re.search(r"^  mimalloc_plain\s+(\S+) us\s+(\S+) us\s+(\S+) us", text, re.M)
    if ref:
        check(all(abs(s * 1e6 - float(t)) <= 0.051 for s, t in
                  zip(subjects[0]["median_seconds"], ref.groups())),
              "the reference's median seconds are the times the text shows")
    check("median_ratio" not in subjects[0], "the reference has no ratio to itself")
    for s in subjects[1:]:
        check(all(len(s.get(k, [])) == 3 for k in ("median_ratio", "faster", "slower", "p")),
              f"{s['name']}: a ratio, rounds faster and slower and p per phase")
        check(all(f + w <= 3 for f, w in zip(s.get("faster", []), s.get("slower", []))),
              f"{s['name']}: more rounds faster and slower than rounds")
        ratios = s.get("ratios", [])
        check(len(ratios) == 3 and all(len(r) == 3 for r in ratios),
              f"{s['name']}: every round's ratio per phase")
        if len(ratios) == 3 and all(len(r) == 3 for r in ratios):
            check(all(abs(sorted(r)[1] - m) <= 1e-4 * m for r, m in
                      zip(ratios, s["median_ratio"])),
                  f"{s['name']}: the median of the rounds' ratios is the median ratio")
            check(all(sum(x < 1 for x in r) == f for r, f in zip(ratios, s["faster"])),
                  f"{s['name']}: the rounds below 1 are the rounds faster")
        if s["name"] in rows:
            check(all(abs(r - t) <= 0.0005 for r, t in zip(s["median_ratio"], rows[s["name"]])),
                  f"{s['name']}: the JSON's ratios are the text's")


def main():
    tool = sys.argv[1]
    scratch = tempfile.mkdtemp(prefix="pmrkit-interleaved-test-")
    json_path = os.path.join(scratch, "map.json")
    out = run(tool, "--rounds", "3", "--workload", "Map", "--json", json_path, "mimalloc_plain",
              "checked", "size_class/fresh", "size_class/shared", "monotonic")
    check(out.returncode == 0, f"a valid run exits 0, not {out.returncode}: {out.stderr}")
    text = out.stdout
    check(re.search(r"^Map\s+build\s+read\s+destroy", text, re.M) is not None,
          "the Map table has a header with the three phases")
    check("UnorderedMap" not in text and "Document" not in text,
          "--workload Map runs Map only")
    ref = re.search(r"^  mimalloc_plain\s+(\S+) us\s+(\S+) us\s+(\S+) us", text, re.M)
    check(ref is not None and all(float(t) > 0 for t in ref.groups()),
          "the reference's row shows its median time of each phase")
    cell = r"(\d+\.\d+) \((\d+)/3\) p=(\d\.\d+)"
    rows = {}
    for name in ("checked", "size_class/fresh", "size_class/shared", "monotonic"):
        m = re.search(rf"^  {re.escape(name)}\s+{cell}\s+{cell}\s+{cell}", text, re.M)
        check(m is not None, f"a row for {name} with a ratio, (faster/3) and p per phase")
        if m:
            rows[name] = [float(m.group(1 + 3 * p)) for p in range(3)]
    if "checked" in rows:
        build, _, destroy = rows["checked"]
        check(build > 1.3 and destroy > 1.3,
              f"checked's ratios to mimalloc_plain are its time over the reference's, so well "
              f"above 1 on build and destroy, not {build} and {destroy}")

    check_json(json_path, text, rows)
    os.remove(json_path)
    os.rmdir(scratch)

    unwritable = os.path.join(scratch, "no", "such", "dir.json")
    bad = run(tool, "--json", unwritable, "mimalloc_plain", "size_class")
    check(bad.returncode == 1, f"an unwritable --json path exits 1, not {bad.returncode}")
    check(f"cannot write {unwritable}" in bad.stderr, f"the message names the path: {bad.stderr!r}")
    check(bad.stdout == "", "nothing runs before an unwritable --json path is refused")

    for args, says in ((["mimalloc_plain", "nosuch"], "mimalloc_plain"),
                       (["--rounds", "0"], "at least 1"),
                       (["--workload", "Foo"], "allowed: UnorderedMap, Map, Document"),
                       (["size_class"], "at least two subjects")):
        bad = run(tool, *args)
        check(bad.returncode == 2, f"{args} exits 2, not {bad.returncode}")
        check(says in bad.stderr, f"{args}: the message says '{says}': {bad.stderr!r}")
        check(bad.stdout == "", f"{args}: nothing runs before the input is refused")

    for f in failures:
        print("FAIL:", f)
    print(f"{'FAILED' if failures else 'ok'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
