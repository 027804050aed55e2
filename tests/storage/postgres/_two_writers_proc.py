"""A writer process of a PostgreSQL store that the two-writers test starts twice.

Run as ``python _two_writers_proc.py HOME DSN SCHEMA TAG COUNT``. It opens the store
for writing (HashEmbedder), prints ``ready`` and waits for ``go`` on stdin; then four
threads file ``COUNT`` memories in namespace ``TAG`` and ``COUNT`` in ``shared``
(singles and batches of three, so writes of both processes interleave) and it prints
one JSON line: the ids each namespace acknowledged. It then waits for ``look`` and
prints one JSON line of what it sees: the ``shared`` ids it can get and the ids that
searches of namespace ``TAG`` return.
"""

from __future__ import annotations

import contextlib
import json
import sys
from concurrent.futures import ThreadPoolExecutor

from kredenc.engine import Kredenc
from kredenc.errors import KredencError
from kredenc.testing.embedders import HashEmbedder


def main() -> None:
    home, dsn, schema, tag, count = sys.argv[1:6]
    n = int(count)
    kb = Kredenc.open(
        home,
        embedder=HashEmbedder(),
        backend="postgres",
        postgres_dsn=dsn,
        postgres_schema=schema,
        durability="none",
        namespace=tag,
    )
    shared = kb.scoped("shared")
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"

    def file(i: int) -> list[tuple[str, str]]:
        view, ns = (kb, tag) if i % 2 else (shared, "shared")
        if i % 5 == 0:
            items = [{"text": f"{tag} batch {i} part {j} about orchards"} for j in range(3)]
            return [(ns, m.id) for m in view.remember_many(items)]
        return [(ns, view.remember(f"{tag} note {i} about orchards").id)]

    acked: dict[str, list[str]] = {tag: [], "shared": []}
    with ThreadPoolExecutor(4) as pool:
        for placed in pool.map(file, range(2 * n)):
            for ns, rid in placed:
                acked[ns].append(rid)
    print(json.dumps(acked), flush=True)
    assert sys.stdin.readline().strip() == "look"
    others = json.loads(sys.stdin.readline())
    seen_shared = []
    for rid in others:
        with contextlib.suppress(KredencError):  # the parent counts what is missing
            seen_shared.append(shared.get(rid).id)
    queries = ("orchards", "note about orchards", "batch part")
    hits = {h.id for q in queries for h in kb.search(q, k=50)}
    print(json.dumps({"shared": seen_shared, "hits": sorted(hits)}), flush=True)
    kb.close()


if __name__ == "__main__":
    main()
