"""schemathesis over every REST operation of the running server's OpenAPI document:
no 5xx, every response conforms to the document (status, content type, headers,
schema) and invalid input is refused with a 4xx. Valid and invalid inputs alike
(schemathesis' positive and negative generation), a bounded number of examples per
operation: about 35 s on two shared cores.

The operations are walked in one test (schemathesis' pytest fixture loader does not
run under this pytest); every failing operation is reported, not only the first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import negative_data_rejection, positive_data_acceptance  # noqa: E402

from kredenc.engine import Kredenc  # noqa: E402
from kredenc.interfaces.server.state import ServerConfig  # noqa: E402

pytestmark = pytest.mark.slow

EXAMPLES = 25  # per operation and generation mode
#: Not checked: that every schema-valid request is accepted. The server checks more
#: than the document can say (the configured limits, names the store knows, times,
#: "give at least one field") and answers those 422 ``invalid_input``, by design.
SEMANTIC = positive_data_acceptance
#: Not checked where an operation has no body: that invalid query or path values are
#: refused. In a query string every value is text (``kind=false`` is the kind
#: "false", ``drawer=`` the empty drawer), so what schemathesis means as a boolean or
#: null there is a valid string. Bodies are JSON, and there it is checked.
TEXT_ONLY = negative_data_rejection


@pytest.fixture(scope="module")
def api(start_server: Callable[..., Any]) -> Any:
    def setup(kb: Kredenc) -> None:
        a = kb.remember("The fuzzed store remembers tea.", tags=["tea"])
        b = kb.remember("A second memory about tea.")
        kb.relate(a.id, b.id, "supports")

    return start_server(ServerConfig(mcp=False, web=False, rate_per_minute=0), setup)


def fuzz(operation: Any, mode: Any, url: str, excluded: list[Any]) -> Callable[[], None]:
    """A hypothesis test of one operation in one generation mode."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        case.call_and_validate(base_url=url, excluded_checks=excluded)

    return run


def test_api_conforms_to_its_document(api: Any) -> None:
    schema = schemathesis.openapi.from_dict(api.app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20
    failures: dict[str, str] = {}
    for operation in operations:
        excluded = [SEMANTIC] if operation.body else [SEMANTIC, TEXT_ONLY]
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run = fuzz(operation, mode, api.url, excluded)
            try:
                run()
            except Unsatisfiable:  # no invalid input exists (e.g. no parameters at all)
                continue
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 (a failure group; reported below)
                inner = getattr(exc, "exceptions", ())  # a group: what it holds
                text = "\n".join([str(exc), *(str(e) for e in inner)])
                failures[f"{operation.label} ({mode.value})"] = text[:3000]
    assert not failures, f"{len(failures)} failing: {sorted(failures)}\n\n" + "\n\n".join(
        f"{k}: {v}" for k, v in failures.items()
    )
