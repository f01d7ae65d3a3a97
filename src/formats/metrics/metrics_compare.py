"""Compares two metrics/default.yaml files by meaning: anchors resolved, inputs as a set
(the reference lists them in hash order), roots in order. Exit 0 when equal."""
import json
import sys

import ruamel.yaml


def load(path):
    with open(path, encoding="utf-8") as f:
        return ruamel.yaml.YAML(typ="safe", pure=True).load(f)


def norm_input(i):
    i = dict(i)
    i.setdefault("formula", "$$")
    i.setdefault("combine", "sum")
    return json.dumps(i, sort_keys=True)


def main(ours_path, ref_path):
    ours, ref = load(ours_path), load(ref_path)
    ok = True
    if ours.get("version") != ref.get("version"):
        print(f"version: {ours.get('version')!r} != {ref.get('version')!r}")
        ok = False
    a = sorted(norm_input(i) for i in ours.get("inputs", []))
    b = sorted(norm_input(i) for i in ref.get("inputs", []))
    if a != b:
        print("inputs differ:")
        for x in sorted(set(a) - set(b)):
            print("  only ours:", x)
        for x in sorted(set(b) - set(a)):
            print("  only reference:", x)
        ok = False
    ra, rb = ours.get("roots", []), ref.get("roots", [])
    if [r["name"] for r in ra] != [r["name"] for r in rb]:
        print("root order differs:")
        print("  ours:", [r["name"] for r in ra])
        print("  reference:", [r["name"] for r in rb])
        ok = False
    by_name = {r["name"]: r for r in rb}
    for r in ra:
        other = by_name.get(r["name"])
        if json.dumps(r, sort_keys=True) != json.dumps(other, sort_keys=True):
            print("root differs:", r["name"])
            print("  ours:     ", json.dumps(r, sort_keys=True))
            print("  reference:", json.dumps(other, sort_keys=True))
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
