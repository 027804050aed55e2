"""The base of every request body: JSON values of the types the OpenAPI document
says (strict: ``false`` is not a number, ``"1"`` not a whole number, ``1`` not
true), and a field the document does not name refused (a mistyped field, ignored,
would leave the caller believing it applied)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


#: A user, agent or run id inside the caller's namespace (checked again by the facade).
ScopeId = Annotated[str | None, Field(min_length=1, max_length=200)]
#: A conversation's id: 1-200 characters, no control characters (as the proxy's
#: ``X-Kredenc-Session`` header).
SessionId = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
#: Exact matches on top-level ``meta`` keys, scalar values (``fields.validate_where``).
Where = Annotated[dict[str, Any] | None, Field(description="meta key: value, all of them")]
