"""Period claims in PostgreSQL (``storage/postgres/claims.py``): the first caller takes a
claim for its TTL and every other, on its own connection, is told what is left; a claim
ends by itself; namespaces do not share claims and the wall shows each only its own;
a PostgreSQL store without Redis claims through its database."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest

from kredenc.engine import Kredenc
from kredenc.errors import StoreError
from kredenc.testing.embedders import HashEmbedder
from kredenc.testing.postgres import require

pytestmark = pytest.mark.postgres

require()

from kredenc.storage.postgres import migrate  # noqa: E402
from kredenc.storage.postgres.claims import PostgresClaims  # noqa: E402


@pytest.fixture
def schema(postgres_dsn: str) -> str:
    return "t_claims_" + uuid.uuid4().hex[:12]


def test_one_caller_of_many_takes_a_claim_until_it_ends(postgres_dsn: str, schema: str) -> None:
    many = [PostgresClaims(postgres_dsn, schema) for _ in range(6)]  # a connection each
    results: list[float] = []
    barrier = threading.Barrier(len(many))

    def race(claims: PostgresClaims) -> None:
        barrier.wait()
        results.append(claims.claim("default", "period:default:decay", 1.0))

    threads = [threading.Thread(target=race, args=(c,)) for c in many]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results)[0] == 0.0 and results.count(0.0) == 1, results
    assert all(0 < left <= 1.0 for left in results if left), results
    # Another job, or the same job in another namespace, is another claim.
    assert many[0].claim("default", "period:default:episodes", 1.0) == 0.0
    assert many[0].claim("other", "period:default:decay", 1.0) == 0.0
    time.sleep(1.05)  # the claim ends with its TTL; nobody released it
    assert many[1].claim("default", "period:default:decay", 1.0) == 0.0
    assert 0 < many[2].claim("default", "period:default:decay", 1.0) <= 1.0
    for claims in many:
        claims.close()


def test_the_claims_table_is_walled_by_namespace(postgres_dsn: str, schema: str) -> None:
    claims = PostgresClaims(postgres_dsn, schema)
    claims.claim("alpha", "period:alpha:decay", 60)
    claims.claim("beta", "period:beta:decay", 60)
    claims.close()
    with migrate.connect(postgres_dsn, schema) as conn:
        forced = conn.execute(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class"
            " WHERE oid = 'claims'::regclass"
        ).fetchone()
        assert forced == (True, True)
        policies = conn.execute(
            "SELECT count(*) FROM pg_policies WHERE tablename = 'claims' AND schemaname = %s",
            [schema],
        ).fetchone()
        assert policies == (1,)
        conn.execute("SELECT set_config('kredenc.ns', 'alpha', false)")
        assert conn.execute("SELECT ns, name FROM claims").fetchall() == [
            ("alpha", "period:alpha:decay")
        ]


def test_a_server_that_does_not_answer_is_one_store_error(schema: str) -> None:
    claims = PostgresClaims("postgresql://127.0.0.1:1/nowhere?connect_timeout=2", schema)
    with pytest.raises(StoreError) as err:
        claims.claim("default", "period:default:decay", 1.0)
    assert "\n" not in err.value.message


def test_a_postgres_store_without_redis_claims_in_its_database(
    tmp_path: Path, postgres_dsn: str, schema: str
) -> None:
    pg = {"backend": "postgres", "postgres_dsn": postgres_dsn, "postgres_schema": schema}
    with Kredenc.open(tmp_path / "a", embedder=HashEmbedder(), durability="none", **pg) as kb:
        assert kb.store.locks_redis_url() == ""
        assert kb.store.claim("period:default:decay", 30, ns="default") == 0.0
        assert 0 < kb.store.claim("period:default:decay", 30, ns="default") <= 30
    with migrate.connect(postgres_dsn, schema) as conn:
        conn.execute("SELECT set_config('kredenc.all', 'on', false)")
        row = conn.execute("SELECT ns, name, until > now() FROM claims").fetchall()
    assert row == [("default", "period:default:decay", True)]
    # Another process's handle (a connection of its own) sees the claim.
    with Kredenc.open(tmp_path / "b", embedder=HashEmbedder(), durability="none", **pg) as kb:
        assert 0 < kb.store.claim("period:default:decay", 30, ns="default") <= 30
