"""A worker's file can register an endpoint that takes no key (a local server), in TOML
and JSON alike: ``api_key_env = ""``. Its requests carry no key even when the usual key's
variable is set, and the spellings people try instead fail at start with the right one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from durable_agent import AgentClient, ModelSpec
from durable_agent._spec.document import AgentSpec
from durable_agent._tools.registry import Registry
from durable_agent.capabilities._config_file import CapabilitiesFileError, load_capabilities
from durable_agent.testing import ScriptedProvider, assistant_text
from tests.support.agent_harness import running_worker

CANARY = "sk-keyless-canary-5d1e"


def write_file(tmp_path: Path, form: str, base_url: str) -> Path:
    if form == "toml":
        path = tmp_path / "worker.toml"
        path.write_text(f'[models.local]\nbase_url = "{base_url}"\napi_key_env = ""\n')
    else:
        path = tmp_path / "worker.json"
        path.write_text(
            json.dumps({"models": {"local": {"base_url": base_url, "api_key_env": ""}}})
        )
    return path


@pytest.mark.parametrize("form", ["toml", "json"])
async def test_an_endpoint_with_no_key_sends_none_from_either_file(
    temporal_env: WorkflowEnvironment,
    task_queue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)  # what leaving the field out would send
    with ScriptedProvider([assistant_text("hello from a local model")]) as provider:
        capabilities = load_capabilities(write_file(tmp_path, form, provider.base_url))
        assert capabilities.models["local"].api_key_env is None
        spec = AgentSpec(
            model=ModelSpec(name="llama", endpoint="local"), session={"end_after_reply": True}
        )
        async with running_worker(
            temporal_env, task_queue, Registry(), capabilities=capabilities
        ) as client:
            agents = AgentClient(client, task_queue=task_queue)
            result = await agents.session(await agents.start(spec, "hi")).result()
    assert result.status == "done", result.error
    assert len(provider.requests) == 1
    [request] = provider.requests
    assert request.body["model"] == "llama"
    sent = {name.lower(): value for name, value in request.headers.items()}
    assert "authorization" not in sent and "api-key" not in sent
    assert CANARY not in json.dumps(sent)


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ('api_key_env = "none"', "models.local.api_key_env: 'none' would be read as the name"),
        ('api_key_env = "null"', "models.local.api_key_env: 'null' would be read as the name"),
        ("api_key_env = false", "models.local.api_key_env: False would be read as the name"),
        ('api_key = ""', "models.local.api_key: an endpoint names the variable"),
        ("keyless = true", "models.local.keyless: an endpoint names the variable"),
    ],
)
def test_other_spellings_of_no_key_fail_naming_the_right_one(
    tmp_path: Path, line: str, named: str
) -> None:
    path = tmp_path / "worker.toml"
    path.write_text(f'[models.local]\nbase_url = "http://127.0.0.1:11434/v1"\n{line}\n')
    with pytest.raises(CapabilitiesFileError) as refused:
        load_capabilities(path)
    assert named in str(refused.value)
    assert 'for an endpoint that takes no key, write api_key_env = ""' in str(refused.value)


def test_an_endpoint_that_leaves_the_field_out_reads_the_usual_variable(tmp_path: Path) -> None:
    path = tmp_path / "worker.toml"
    path.write_text('[models.local]\nbase_url = "http://127.0.0.1:11434/v1"\n')
    assert load_capabilities(path).models["local"].api_key_env == "OPENAI_API_KEY"


def test_the_manuals_worker_file_loads_with_its_keyless_endpoint(tmp_path: Path) -> None:
    page = (Path(__file__).parents[2] / "docs" / "how-to" / "capabilities.md").read_text()
    section = page[page.index("## The worker's file") :]
    path = tmp_path / "worker.toml"
    path.write_text(section.split("```toml\n", 1)[1].split("```", 1)[0])
    models = load_capabilities(path).models
    assert models["local"].api_key_env is None
    assert models["openai"].api_key_env == "OPENAI_API_KEY"
