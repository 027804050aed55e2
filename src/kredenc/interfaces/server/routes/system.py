"""``/health`` (open, reveals nothing about data), ``/stats``, ``/check`` and the
lifecycle jobs (``GET /jobs``, ``POST /jobs/run``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from kredenc import __version__
from kredenc.interfaces.guard import error_response
from kredenc.interfaces.server.deps import KB, State, TenantDep
from kredenc.interfaces.server.routes.body import Body
from kredenc.memory.scheduler import JOBS, job_intervals

router = APIRouter(tags=["system"])


class Health(BaseModel):
    status: str
    version: str


class CheckReport(BaseModel):
    sound: bool
    findings: list[str]
    faults: list[str]


class JobStatus(BaseModel):
    name: str
    interval_s: float
    last_run: float | None = Field(
        description="Unix seconds of the last run by this server (asked for or scheduled)"
    )
    last_result: dict[str, Any] | None


class JobList(BaseModel):
    items: list[JobStatus]


class JobsToRun(Body):
    names: list[str] = Field(default_factory=list, description="none: every job")


class JobReports(BaseModel):
    reports: list[dict[str, Any]]


@router.get("/health", response_model=Health)
def health() -> Health:
    """Whether the server answers: no key needed, and nothing about the store."""
    return Health(status="ok", version=__version__)


#: What ``/stats`` keeps from a caller with a key: the server's folder, and the log's
#: records and bytes, which every tenant's writes make grow.
STORE_WIDE = ("store", "log_records", "log_bytes")


@router.get("/stats")
def stats(kb: KB, tenant: TenantDep) -> dict[str, Any]:
    """The caller's namespace: records per drawer and type, edges, model. Without keys
    (loopback, one user) also the store's folder and its log's size; a caller with a
    key sees its namespace's figures only (docs/server.md, Auth and tenants)."""
    found = kb.stats()
    if tenant.keyed:
        for name in STORE_WIDE:
            found.pop(name, None)
    return found


@router.get("/check", response_model=CheckReport)
def check(kb: KB, tenant: TenantDep, full: bool = False) -> CheckReport | JSONResponse:
    """``kredenc check`` on the served store (read-only): sound, findings, faults. The
    store's files are every tenant's: a caller with a key is told whether the store is
    sound and which parts are at fault, not the findings (the server's folder, the log's
    size, other namespaces' record ids), and the full scan is the operator's."""
    if not tenant.keyed:
        return CheckReport(**kb.check(full=full))
    if full:
        return error_response(
            403,
            "operator_only",
            "the full check scans every tenant's records: it is the operator's",
            "the operator runs 'kredenc check --full' on the server's store",
        )
    report = kb.check(full=False)
    said = (
        ["sound"]
        if report["sound"]
        else ["the store has a fault: the operator runs 'kredenc check'"]
    )
    return CheckReport(sound=report["sound"], findings=said, faults=report["faults"])


@router.get("/jobs", response_model=JobList)
def jobs(kb: KB, state: State) -> JobList:
    """The lifecycle jobs, each with its interval and its last run on this server."""
    runs = state.job_runs(kb.namespace)
    every = job_intervals(kb.settings.scheduler_intervals)
    return JobList(
        items=[
            JobStatus(
                name=name,
                interval_s=every[name],
                last_run=runs[name][0] if name in runs else None,
                last_result=runs[name][1] if name in runs else None,
            )
            for name in JOBS
        ]
    )


@router.post("/jobs/run", response_model=JobReports)
def run_jobs(body: JobsToRun, kb: KB, state: State) -> JobReports:
    """Run the named jobs (every job when none is named) now, in order; their reports."""
    return JobReports(reports=state.run_lifecycle(kb, body.names))
