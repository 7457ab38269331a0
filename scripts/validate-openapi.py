#!/usr/bin/env python3
"""Validates the OpenAPI documents of a running trellis API server with the
off-the-shelf openapi-spec-validator (PyPI): every group/version document
listed by /openapi/v3 as OpenAPI 3.0, and /openapi/v2 as Swagger 2.0.

Usage: validate-openapi.py http://127.0.0.1:PORT [--max-errors N]

Prints one line per document and up to N errors for an invalid one; exits 1
if any document is invalid, 2 if the module is missing (pip install
openapi-spec-validator).
"""

import argparse
import json
import sys
import time
import urllib.request

try:
    from jsonschema_path import SchemaPath
    from openapi_spec_validator import OpenAPIV2SpecValidator, OpenAPIV30SpecValidator
except ImportError:
    print("openapi-spec-validator is not installed", file=sys.stderr)
    sys.exit(2)


def fetch(base, path):
    req = urllib.request.Request(base + path, headers={"Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def check(name, doc, cls, max_errors):
    start = time.monotonic()
    errors = list(cls(SchemaPath.from_dict(doc)).iter_errors())
    took = time.monotonic() - start
    if not errors:
        print(f"ok      {name} ({took:.1f}s)")
        return True
    print(f"INVALID {name}: {len(errors)} error(s)")
    for e in errors[:max_errors]:
        where = "/".join(str(p) for p in getattr(e, "absolute_path", []) or [])
        print(f"  - {where}: {str(e).splitlines()[0][:300]}")
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--max-errors", type=int, default=10)
    args = ap.parse_args()
    base = args.url.rstrip("/")
    ok = True
    root = fetch(base, "/openapi/v3")
    for key, entry in sorted(root["paths"].items()):
        doc = fetch(base, entry["serverRelativeURL"])
        ok &= check(f"/openapi/v3/{key}", doc, OpenAPIV30SpecValidator, args.max_errors)
    ok &= check("/openapi/v2", fetch(base, "/openapi/v2"), OpenAPIV2SpecValidator, args.max_errors)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
