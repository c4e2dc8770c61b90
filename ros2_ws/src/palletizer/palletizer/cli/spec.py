"""`scripts/spec`: check a pallet spec, or print its JSON Schema (docs/pallet-spec.md).

scripts/spec check FILE     validate FILE (YAML or JSON) against the schema and the catalogue's
                            types; print the normalised spec as JSON, or every problem (exit 2)
scripts/spec schema         print the JSON Schema (configs/pallet_spec.schema.json is this)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from palletizer.core.pallet_spec import SpecError, read_spec, spec_schema

__all__ = ['main']


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog='scripts/spec', description=__doc__.split('\n\n')[0])
    sub = p.add_subparsers(dest='command', required=True)
    check = sub.add_parser('check', help='validate a spec file and print it normalised')
    check.add_argument('file')
    sub.add_parser('schema', help="print the spec's JSON Schema")
    ns = p.parse_args(argv)
    if ns.command == 'schema':
        print(json.dumps(spec_schema(), indent=2, sort_keys=True))
        return 0
    from palletizer.core.config import load_config

    try:
        spec = read_spec(ns.file, types=load_config().catalogue.types)
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(json.dumps(spec.to_dict(), indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main())
