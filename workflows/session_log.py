"""The workflow's log lines: temporalio's ``workflow.logger`` (nothing is written while
a workflow replays, so a line is never repeated), each with the session, run, turn,
attempt and agent as fields."""

from __future__ import annotations

import logging

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from durable_agent._session import Session


def session_log(session: Session, level: int, text: str, *args: object) -> None:
    info = workflow.info()
    context = {
        "session_id": info.workflow_id,
        "run_id": info.run_id,
        "turn": session.view.loop.turn,
        "attempt": info.attempt,
        "agent": session.view.model.agent_name,
        "phase": session.view.loop.phase,
    }
    workflow.logger.log(level, text, *args, extra=context)


def warn(session: Session, text: str, *args: object) -> None:
    session_log(session, logging.WARNING, text, *args)
