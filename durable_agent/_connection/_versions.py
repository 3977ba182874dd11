"""Versioned workers: each build of the worker is a version of a Temporal worker
deployment (a deployment name and a build id).

Sessions are pinned: a run stays on the build that started it and never replays on
another. When the workers' owner makes a new build current, a session goes to it by
continue-as-new at a turn boundary, on its own (``session.upgrade = "auto"``) or when a
person moves it (``"pinned"``). The shared-limit workflow upgrades on its own.
"""

from __future__ import annotations

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

#: The deployment name when only a build id is given.
DEFAULT_DEPLOYMENT = "durable-agent"
#: The visibility field the server keeps each run's version in (``DEPLOYMENT:BUILD_ID``).
VERSION_FIELD = "TemporalWorkerDeploymentVersion"
DEPLOYMENT_FIELD = "TemporalWorkerDeployment"


def versioned(build_id: str, deployment: str = DEFAULT_DEPLOYMENT) -> WorkerDeploymentConfig:
    """A worker's versioning: this build of ``deployment``; workflows without their own
    behaviour are pinned (a user's, beside the sessions)."""
    if not build_id.strip() or not deployment.strip():
        raise ValueError("a versioned worker needs a deployment name and a build id")
    if ":" in deployment or ":" in build_id:
        raise ValueError(f"deployment {deployment!r} and build id {build_id!r} may not hold ':'")
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


def label(deployment: str, build_id: str) -> str:
    """How a version is written: ``DEPLOYMENT:BUILD_ID`` (as the server lists it)."""
    return f"{deployment}:{build_id}"


def split_label(version: str, deployment: str = DEFAULT_DEPLOYMENT) -> tuple[str, str]:
    """``DEPLOYMENT:BUILD_ID`` (or a bare build id of ``deployment``) as its two parts."""
    name, _, build = version.rpartition(":")
    if not build:
        raise ValueError(f"not a version: {version!r} (DEPLOYMENT:BUILD_ID or BUILD_ID)")
    return name or deployment, build
