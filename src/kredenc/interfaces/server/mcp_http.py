"""(placeholder: filled in by the server work) mount(app, state) adds this part's routes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from kredenc.interfaces.server.state import ServerState


def mount(app: FastAPI, state: ServerState) -> Any:
    return None
