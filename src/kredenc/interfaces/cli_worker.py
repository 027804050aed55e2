"""``kredenc worker``: run the ingest jobs and lifecycle runs that ``kredenc serve``
queues to RQ (``jobs_queue = "rq"``; :mod:`kredenc.interfaces.server.worker`,
docs/workers.md)."""

from __future__ import annotations

import importlib.util
import re

import click

from kredenc.errors import MissingExtra, shown
from kredenc.interfaces.cli_common import context, json_option, settings_of
from kredenc.interfaces.terminal import json_text


def _worker_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A name Redis takes (CLIENT SETNAME: no spaces): letters, digits and . _ : -."""
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", value):
        raise click.BadParameter(
            f"{shown(value)} is not a worker name: 1-64 letters, digits and . _ : -"
        )
    return value


@click.command("worker")
@click.option("--burst", is_flag=True, help="Run the queued jobs, then exit (default: wait).")
@click.option(
    "--name",
    default=None,
    callback=_worker_name,
    help="The worker's name in RQ (default: kredenc-HOST-PID; letters, digits, . _ : -).",
)
@click.option(
    "--scheduler",
    is_flag=True,
    help="Also run the lifecycle jobs of the namespace on a schedule (scheduler_intervals).",
)
@json_option
def worker_command(burst: bool, name: str | None, scheduler: bool) -> None:
    """Run RQ jobs for this store: ingestion and lifecycle runs that servers queue.

    Needs backend = 'postgres' and a Redis (jobs_redis_url, else redis_url, else opcache_redis_url).
    SIGTERM or Ctrl-C stops after the running job; a second one stops at once (the job
    is then run again by another worker). With --scheduler it also runs the lifecycle
    jobs on a schedule, once per interval across every server and worker of the store.
    """
    if importlib.util.find_spec("rq") is None:
        raise MissingExtra("kredenc worker", "workers")
    from kredenc.interfaces.server.worker import run_worker

    c = context()
    settings = settings_of(c)
    if scheduler:  # an unknown job in scheduler_intervals: one line, before anything starts
        from kredenc.memory.scheduler import job_intervals

        job_intervals(settings.scheduler_intervals)

    def ready(worker: str, where: str) -> None:
        if c.json:  # for a script: which worker, on one line
            click.echo(json_text({"worker": worker, "redis": where}))
        else:
            click.echo(f"kredenc worker {worker} waiting for jobs on {where}", err=True)

    run_worker(settings, burst=burst, name=name, on_ready=ready, scheduler=scheduler)


COMMANDS: tuple[click.Command, ...] = (worker_command,)
