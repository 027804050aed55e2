"""The base of every request body: JSON values of the types the OpenAPI document
says (strict: ``false`` is not a number, ``"1"`` not a whole number, ``1`` not
true), fields the document does not name ignored (a newer client may send more)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")
