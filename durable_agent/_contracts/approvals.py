"""What crosses the workflow boundary about people's decisions: the gate's activity
inputs, the decision signals and updates with their answers, standing grants, signed
tokens to check, pending approvals and escalations. Kept lean: history keeps them.

Also what a signed decision is signed for (``decision_digest``: the whole decision and
the call it decides, in its run) and the approvers' keys that sign and verify the tokens
(``ApproverKeys``)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import Field

from durable_agent._spec.approval_policy import ApprovalSettings, ArgumentTest, describe_arguments
from durable_agent._wire.messages import Contract


class ApprovalCheckInput(Contract):
    calls: list[tuple[str, str]]
    """(tool name, raw arguments) of the calls a predicate must judge."""
    predicates: list[str | None] | None = None
    """For each call, the named predicate (``@approval_predicate``) of a rule to ask, or
    ``None`` for the tool's own (unset: the tool's own for every call)."""


class DescribeCallsInput(Contract):
    calls: list[tuple[str, str]]
    """(tool name, raw arguments) of calls waiting for a person, whose tool describes
    its calls (``@tool(describe=...)``)."""


class EscalationNotice(Contract):
    """Tell a second group that calls wait for them (``approvals.escalation``)."""

    notifier: str | None = None
    """The ``@escalation_notifier`` to call (``None``: the escalation is only logged)."""
    notify: list[str]
    approvals: list[PendingApproval]
    session_id: str = ""
    """Filled in by the activity (the workflow asking)."""


DecisionKind = Literal["approve", "deny", "respond"]


class ApprovalSignal(Contract):
    """A person's decision on one pending call (signals ``approve``, ``deny`` and
    ``respond``; the ``decide`` update adds ``decision``)."""

    approval_id: str
    by: str | None = None
    reason: str | None = None
    """Why (for a denial: what the model reads)."""
    arguments: dict[str, Any] | None = None
    """Approve with these arguments instead of the model's (validated against the tool's
    schema before anything runs; the originals are kept on the approval record)."""
    always: Literal["tool", "matching"] | None = None
    """Approve this call and, for the rest of the session, every call of its tool
    (``tool``) or those whose arguments pass ``matching`` (until revoked)."""
    matching: list[ArgumentTest] = Field(default_factory=list)
    content: str | None = None
    """``respond``: the tool's result, given by a person (the tool does not run)."""
    is_error: bool = False
    """``respond``: give ``content`` as an error result."""
    token: str | None = None
    """A signed token proving who decides (``durable_agent._contracts.approvals``)."""


class DecisionRequest(ApprovalSignal):
    """The ``decide`` update: a decision the caller learns the fate of at once."""

    decision: DecisionKind

    def as_signal(self) -> ApprovalSignal:
        """The same decision as the signal of its kind carries it."""
        return ApprovalSignal.model_validate(self.model_dump(exclude={"decision"}))


class DecisionResult(Contract):
    approval_id: str
    """The call decided (a grant's id, for a revocation)."""
    decision: DecisionKind | Literal["revoke"]
    by: str | None = None
    verified: bool = False
    """``by`` was proved by a signed token."""
    grant_id: str | None = None
    """The grant an ``always`` decision made."""


class Grant(Contract):
    """An "always" decision: later calls of ``tool`` (passing ``matching``) are approved
    without asking, for the rest of the session, until revoked."""

    grant_id: str
    tool: str
    matching: list[ArgumentTest] = Field(default_factory=list)
    by: str | None = None
    verified: bool = False
    at: datetime
    approval_id: str
    """The decision that made it."""


class ApprovalPolicyView(Contract):
    """The ``approval_policy`` query: how the session's gate decides."""

    settings: ApprovalSettings
    tool_approvers: dict[str, list[str]] = Field(default_factory=dict)
    grants: list[Grant] = Field(default_factory=list)


class RevokeGrantSignal(Contract):
    grant_id: str
    by: str | None = None
    reason: str | None = None
    token: str | None = None


class TokenCheck(Contract):
    """One signed decision for the workers to verify (with keys only they hold); the
    session it must be for is the workflow asking."""

    token: str
    subject: str
    """The approval id (or grant id) the token must be for."""
    action: str
    """``approve``, ``deny``, ``respond`` or ``revoke``."""
    digest: str | None = None
    """What the token must sign: the whole decision and its call (``decision_digest``)."""


class TokenVerdict(Contract):
    approver: str | None = None
    """Who signed, when the token is good."""
    error: str | None = None


class PendingApproval(Contract):
    approval_id: str
    turn: int
    slot: int
    tool_name: str
    arguments: str
    requested_at: datetime
    deadline: datetime | None = None
    described_arguments: str | None = None
    """The call in a few readable words (the tool's ``describe``, or a default form)."""
    approvers: list[str] | None = None
    """Who may decide it (unset: anyone the session's policy accepts)."""
    rule: str | None = None
    """The spec's rule that asked for a person (unset: the tool's own policy)."""
    escalated_to: list[str] | None = None
    """Its deadline passed once: extended, and these names were asked too."""
    signed_only: bool | None = None
    """The worker's owner names who decides the tool's calls: only their signed
    decisions count, and an escalation asks no one else to decide."""
    awaits_output: bool | None = None
    """The call waits for its output from outside (``respond`` commits it; ``deny``
    refuses it), not for leave to run: its tool never runs on a worker."""

    def for_approver(self) -> str:
        """What every screen shows an approver: the tool's own words for the call, when
        it has some, and always the call itself with every argument whole (an owner's
        describer may leave out what matters, or be cut; the arguments are what runs)."""
        whole = describe_arguments(self.tool_name, self.arguments)
        said = self.described_arguments
        return whole if not said or said == whole else f"{said}\n  the call: {whole}"

    run: str | None = None
    """The workflow run that asked (with the inline run's own name inside a user's
    workflow): a signed decision names it (``decision_digest``), so a token for this
    call is worth nothing for the same approval id asked by another run, after a reset
    or in the next inline run of the same workflow."""


#: How a session says no call waits under an approval id (the client knows it by this,
#: and answers with the ids that do wait).
NO_WAITING_CALL = "no call waits for a decision or its output under this id"


class ChildApprovals(Contract):
    """A sub-agent's undecided approvals, as it reports them to its parent session (a
    report of more than a page comes in pages, one signal each)."""

    child_id: str
    pending: list[PendingApproval]
    continued: bool = False
    """This page adds to the report before it (a report's first page replaces the last
    report)."""


# What a signed decision is signed for: a digest of the whole decision and of the call
# it decides, in the workflow run that asked for it.
#
# A token that named only the session, the approval id and the action let anything else
# ride along unsigned: edited arguments, an "always" scope, a response's content, or the
# same approval id in a new session started under the same id, in the next agent run
# inline in the same workflow, or after a reset. The digest covers each of those, so a
# token is worth exactly the decision its signer saw. Pure: the workflow computes it for
# the workers to compare, the client for the signer to sign.

#: The fields of a decision its signer vouches for (``by`` comes from the token itself).
DECIDED_FIELDS = {"reason", "arguments", "always", "matching", "content", "is_error"}


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def decision_digest(
    action: str,
    subject: str,
    run: str,
    call: PendingApproval | None = None,
    decision: ApprovalSignal | None = None,
) -> str:
    """The digest a token for ``action`` on ``subject`` (an approval or grant id) signs:
    the decision's content (why, edited arguments, scope and its tests, a response and
    whether it is an error), the call's tool and arguments, and the run it was asked
    in: the call's own ``run`` when it names one, else ``run`` (the session's first run
    id, the same across continue-as-new and new for a new session; what a grant's
    revocation is bound to)."""
    if call is not None and call.run:
        run = call.run
    content: dict[str, Any] = {}
    if decision is not None:
        content = decision.model_dump(
            mode="json",
            include={"reason", "arguments", "always", "matching", "content", "is_error"},
        )
    body = {
        "action": action,
        "subject": subject,
        "run": run,
        "decision": content,
        "call": None
        if call is None
        else {"tool": call.tool_name, "arguments": _sha256(call.arguments)},
    }
    return _sha256(json.dumps(body, sort_keys=True, separators=(",", ":")))


# Signed decisions: a name the caller types proves nothing, a token signed with the
# approver's private key does.
#
# A token is a JWT (EdDSA, Ed25519) whose key id and subject are the approver's name,
# bound to one session, one approval (or grant) and one action, and short-lived. The
# approver (or an entry point that authenticated them) signs with the private key; the workers
# verify with the public keys they hold (``DURABLE_AGENT_APPROVER_KEYS``: a JSON file of
# name -> PEM public key). Neither key ever enters a workflow payload; the token does,
# and it is worth nothing for any other decision.

AUDIENCE = "durable-agent"
KEYS_ENV = "DURABLE_AGENT_APPROVER_KEYS"
"""The worker's file of approver public keys (JSON: name -> PEM)."""
DEFAULT_TTL_SECONDS = 300
#: The longest a token may live (its ``exp`` after its ``iat``): workers refuse longer.
MAX_TTL_SECONDS = 3600


@dataclass(frozen=True)
class ApproverKey:
    """An approver's private key, to sign their decisions with."""

    name: str
    private_key: Ed25519PrivateKey

    @classmethod
    def generate(cls, name: str) -> ApproverKey:
        return cls(name, Ed25519PrivateKey.generate())

    @classmethod
    def from_pem(cls, name: str, pem: bytes) -> ApproverKey:
        key = serialization.load_pem_private_key(pem, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"approver key for {name!r}: not an Ed25519 private key")
        return cls(name, key)

    @classmethod
    def from_file(cls, path: str | Path) -> ApproverKey:
        """A key file written by ``durable-agent approver-key``: the name, then the PEM."""
        text = Path(path).read_text()
        name, _, pem = text.partition("\n")
        if not pem.strip():
            raise ValueError(
                f"{path}: expected the approver's name on the first line, then a PEM key"
            )
        return cls.from_pem(name.strip(), pem.encode())

    def private_pem(self) -> bytes:
        return self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def public_pem(self) -> str:
        return (
            self.private_key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def sign(
        self,
        session_id: str,
        subject: str,
        action: str,
        *,
        digest: str | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        now: float | None = None,
    ) -> str:
        """A token for one decision: ``action`` (approve, deny, respond, revoke) on
        ``subject`` (an approval id, or a grant id) of ``session_id``; ``digest``: the
        whole decision and its call (``decision_digest``), which workers require."""
        issued = time.time() if now is None else now
        claims = {
            "sub": self.name,
            "aud": AUDIENCE,
            "sid": session_id,
            "aid": subject,
            "act": action,
            "iat": int(issued),
            "exp": int(issued + ttl_seconds),
            **({"dig": digest} if digest is not None else {}),
        }
        return jwt.encode(claims, self.private_key, algorithm="EdDSA", headers={"kid": self.name})


class ApproverKeys:
    """The public keys a worker checks decisions with, by approver name."""

    def __init__(self, keys: dict[str, Ed25519PublicKey] | None = None) -> None:
        self._keys = dict(keys or {})

    @classmethod
    def from_json(cls, text: str) -> ApproverKeys:
        keys: dict[str, Ed25519PublicKey] = {}
        for name, pem in json.loads(text).items():
            key = serialization.load_pem_public_key(pem.encode())
            if not isinstance(key, Ed25519PublicKey):
                raise ValueError(f"approver {name!r}: not an Ed25519 public key")
            keys[name] = key
        return cls(keys)

    @classmethod
    def from_env(cls) -> ApproverKeys:
        """The keys in ``$DURABLE_AGENT_APPROVER_KEYS`` (none when it is unset)."""
        path = os.environ.get(KEYS_ENV)
        return cls.from_json(Path(path).read_text()) if path else cls()

    def __len__(self) -> int:
        return len(self._keys)

    def verify(
        self, token: str, session_id: str, subject: str, action: str, digest: str | None = None
    ) -> str:
        """The approver who signed ``token`` for exactly this decision (with ``digest``:
        its whole content and call, ``decision_digest``); ``ValueError`` saying why not
        otherwise. A token that would live longer than ``MAX_TTL_SECONDS`` is refused."""
        try:
            name = jwt.get_unverified_header(token).get("kid")
        except jwt.PyJWTError as error:
            raise ValueError(f"not a token ({error})") from None
        if not isinstance(name, str) or name not in self._keys:
            raise ValueError(f"no worker key for the signer {name!r}")
        key = self._keys[name]
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=["EdDSA"],
                audience=AUDIENCE,
                options={"require": ["exp", "iat", "sub", "sid", "aid", "act"]},
            )
        except jwt.PyJWTError as error:
            raise ValueError(str(error)) from None
        if claims["exp"] - claims["iat"] > MAX_TTL_SECONDS:
            raise ValueError(f"the token would live over {MAX_TTL_SECONDS} s")
        wanted = {"sub": name, "sid": session_id, "aid": subject, "act": action}
        if digest is not None:
            wanted["dig"] = digest
        wrong = [k for k, v in wanted.items() if claims.get(k) != v]
        if wrong:
            what = {
                "sub": "signer",
                "sid": "session",
                "aid": "call",
                "act": "action",
                "dig": "decision (its content, its call or the session's run)",
            }
            raise ValueError(f"signed for another {', '.join(what[k] for k in wrong)}")
        return name
