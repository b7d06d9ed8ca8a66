"""``bedrock``: Amazon Bedrock Runtime, signed on the host with SigV4 from the AWS credential chain.

``bedrock/MODEL_ID`` is a Bedrock model id or inference profile (``anthropic.claude-sonnet-4-20250514-v1:0``,
``us.anthropic.claude-...``, ``amazon.nova-pro-v1:0``, ``meta.llama3-...``) or an ARN.

* Anthropic's models (an id naming ``anthropic``) speak Anthropic Messages on Bedrock: ``/model/ID/invoke`` and
  ``/model/ID/invoke-with-response-stream`` with ``anthropic_version: bedrock-2023-05-31`` in the body. A
  Messages agent (Claude Code, the ``anthropic`` SDK) is passed through; ``count_tokens`` goes to
  ``/model/ID/count-tokens``.
* Every other model speaks Converse (``/model/ID/converse``, ``/model/ID/converse-stream``), translated from and
  to the agentcompass (OpenAI-style) messages through Anthropic's format (:mod:`agentcompass_models.bedrock_wire`).
  ``--model-arg api=converse`` sends an Anthropic model through Converse too.
* Streams come as AWS event-stream, read with botocore's parser and relayed as Anthropic server-sent events.
* Credentials: botocore's credential chain (``$AWS_ACCESS_KEY_ID``/``$AWS_SECRET_ACCESS_KEY``/
  ``$AWS_SESSION_TOKEN``, ``$AWS_PROFILE`` and the shared files, SSO, web identity, container and instance
  roles), refreshed as botocore refreshes them; each request (each retry) signed with botocore's ``SigV4Auth``
  for the service ``bedrock``. Nothing of them leaves the host process: an agent in a container talks to the
  run's gateway, which signs.
* Region: ``--model-arg region=R``, else ``$AWS_REGION``, ``$AWS_DEFAULT_REGION``, the profile's region.
  Endpoint: ``--model-base-url`` (a VPC endpoint, a proxy), else ``https://bedrock-runtime.REGION.amazonaws.com``.

botocore is an optional dependency: ``pip install 'agentcompass-models[bedrock]'``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import yarl
from agentcompass.errors import UsageError
from agentcompass.runtime.model_providers import ProviderSettings
from agentcompass.runtime.model_stream import NativeReply, NativeRequest, StreamEvent
from agentcompass.runtime.models import ChatResponse, Usage

from agentcompass_models.anthropic import AnthropicClient, from_anthropic
from agentcompass_models.bedrock_wire import converse_request, message_of_converse, sse_of_eventstream
from agentcompass_models.http import ProviderError, answer_problem
from agentcompass_models.native import send_native
from agentcompass_models.openai import generation_params
from agentcompass_models.streaming import stream_answer

BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
SIGNING_NAME = "bedrock"
EVENT_STREAM = "application/vnd.amazon.eventstream"
#: Where the credential chain looks, for the message when it finds nothing.
CHAIN = ("$AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY, $AWS_PROFILE / ~/.aws/credentials, SSO, "
         "a web identity, or a container or instance role")


def _botocore() -> Any:
    """botocore, with the modules this provider uses loaded (a clear error when it is not installed)."""
    try:
        import botocore.auth
        import botocore.awsrequest
        import botocore.credentials
        import botocore.session
    except ImportError:
        raise UsageError("the bedrock provider needs botocore: pip install 'agentcompass-models[bedrock]'") from None
    return botocore


class BedrockClient(AnthropicClient):
    """Bedrock Runtime: Anthropic Messages (invoke) for Anthropic's models, Converse for the others."""

    provider = "bedrock"
    native_protocols: frozenset[str] = frozenset({"anthropic"})

    def __init__(self, model: str, base_url: str, settings: ProviderSettings, *, credentials: Any, region: str,
                 converse: bool, key_source: str, params: Mapping[str, Any] | None = None) -> None:
        self._credentials = credentials
        frozen = credentials.get_frozen_credentials()
        super().__init__(model, base_url, settings, api_key=None, key_source=key_source, params=params,
                         extra_secrets=tuple(s for s in (frozen.access_key, frozen.secret_key, frozen.token) if s))
        self.region = region
        self.converse = converse
        if converse:
            self.native_protocols = frozenset()

    # -- where and how ------------------------------------------------------------------------------

    def model_url(self, action: str) -> yarl.URL:
        """``/model/ID/ACTION``, the id percent-encoded once (``:`` as ``%3A``), as SigV4 signs it."""
        return yarl.URL(f"{self.base_url}/model/{quote(self.model, safe='')}/{action}", encoded=True)

    def url(self) -> str:
        return str(self.model_url("converse" if self.converse else "invoke"))

    def headers(self) -> dict[str, str]:
        return {"Content-Type": "application/json", "Accept": "application/json"}

    async def authorize(self, url: Any, headers: dict[str, str], content: bytes) -> tuple[Any, dict[str, str]]:
        """``url`` as it was signed and the headers with the SigV4 signature of ``content`` (botocore's signer)."""
        botocore = _botocore()
        target = url if isinstance(url, yarl.URL) else yarl.URL(str(url), encoded=True)
        streamed = target.path.endswith("-stream")
        creds = self._credentials
        if isinstance(creds, botocore.credentials.RefreshableCredentials):
            frozen = await asyncio.to_thread(creds.get_frozen_credentials)  # may refresh (SSO, a role)
        else:
            frozen = creds.get_frozen_credentials()
        for secret in (frozen.access_key, frozen.secret_key, frozen.token):
            self.add_secret(secret or "")
        wanted = {"Content-Type": "application/json", "Accept": EVENT_STREAM if streamed else "application/json"}
        request = botocore.awsrequest.AWSRequest(method="POST", url=str(target), data=content, headers=wanted)
        botocore.auth.SigV4Auth(frozen, SIGNING_NAME, self.region).add_auth(request)
        return target, dict(request.headers.items())

    def streams(self, content_type: str) -> bool:
        return EVENT_STREAM in content_type or "text/event-stream" in content_type

    def relay(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        return sse_of_eventstream(chunks, self.model)

    # -- bodies -------------------------------------------------------------------------------------

    def invoke_body(self, body: Mapping[str, Any], beta: str = "") -> dict[str, Any]:
        """A Messages body as InvokeModel takes it: no ``model`` (the URL names it), no ``stream`` (the endpoint
        says it), Bedrock's ``anthropic_version``, the beta flags in the body."""
        out = {k: v for k, v in body.items() if k not in ("model", "stream")}
        out.setdefault("anthropic_version", BEDROCK_ANTHROPIC_VERSION)
        if beta:
            out["anthropic_beta"] = [b.strip() for b in beta.split(",") if b.strip()]
        return out

    def request_body(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None,
                     params: Mapping[str, Any]) -> dict[str, Any]:
        body = self.body(messages, tools, params)
        return converse_request(body) if self.converse else self.invoke_body(body)

    # -- calls --------------------------------------------------------------------------------------

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> ChatResponse:
        if self.converse:
            data, attempts = await self.post_json(self.request_body(messages, tools, params), _converse_problem)
            data = message_of_converse(data, self.model)
        else:
            data, attempts = await self.post_json(self.request_body(messages, tools, params),
                                                  lambda data: answer_problem("anthropic", data))
        message, finish = from_anthropic(data)
        usage = data.get("usage") or {}
        prompt = sum(int(usage.get(k) or 0) for k in
                     ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        return ChatResponse(message=message, model=str(data.get("model") or self.model),
                            usage=Usage(prompt, int(usage.get("output_tokens") or 0)), finish_reason=finish,
                            metadata={"attempts": attempts})

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **params: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        """The answer as Bedrock streams it (ConverseStream or InvokeModelWithResponseStream), read as Messages."""
        url = self.model_url("converse-stream" if self.converse else "invoke-with-response-stream")
        async for event in stream_answer(self, "anthropic", url, self.headers(),
                                         self.request_body(messages, tools, params)):
            yield event

    async def native(self, request: NativeRequest) -> NativeReply:
        """The agent's Messages request as it is, on InvokeModel (see the module's docstring)."""
        beta = request.headers.get("anthropic-beta", "")
        if request.path.endswith("count_tokens"):
            return await self._count_tokens(request, beta)
        body = self.invoke_body(request.body, beta)
        url = self.model_url("invoke-with-response-stream" if request.stream else "invoke")
        return await send_native(self, dataclasses.replace(request, body=body), url,
                                 self.headers(), model_in_body=False)

    async def _count_tokens(self, request: NativeRequest, beta: str) -> NativeReply:
        """``messages/count_tokens`` on Bedrock's CountTokens, its answer in Anthropic's shape."""
        inner = self.invoke_body({"max_tokens": 1, **request.body}, beta)
        body = {"input": {"invokeModel": {"body": json.dumps(inner)}}}
        reply = await send_native(self, NativeRequest("anthropic", "messages/count_tokens", body),
                                  self.model_url("count-tokens"), self.headers(), model_in_body=False, params={})
        if reply.status == 200 and reply.error is None:
            try:
                tokens = int(json.loads(reply.body)["inputTokens"])
            except (ValueError, KeyError, TypeError):
                return reply
            return dataclasses.replace(reply, body=json.dumps({"input_tokens": tokens}).encode())
        return reply

    def _http_error(self, status: int, body: bytes) -> ProviderError:
        error = super()._http_error(status, body)
        if status in (401, 403):  # not an API key: name the credential chain
            error.args = (error.args[0].replace("check the API key", "check the AWS credentials"),)
        return error


def _converse_problem(data: Mapping[str, Any]) -> str | None:
    try:
        message_of_converse(data, "")
    except (ValueError, TypeError, AttributeError) as exc:
        return f"JSON that is not a Converse answer ({exc})"
    return None


def _credentials(settings: ProviderSettings) -> tuple[Any, str, str]:
    """The AWS credentials (botocore's object), where they came from, and the profile's region."""
    botocore = _botocore()
    key_id, secret = settings.env("AWS_ACCESS_KEY_ID"), settings.env("AWS_SECRET_ACCESS_KEY")
    if key_id and secret:  # the chain's first link, read from the settings' environment
        creds = botocore.credentials.Credentials(key_id, secret, settings.env("AWS_SESSION_TOKEN"), method="env")
        return creds, "$AWS_ACCESS_KEY_ID / $AWS_SECRET_ACCESS_KEY", ""
    session = botocore.session.Session(profile=settings.env("AWS_PROFILE") or None)
    found = session.get_credentials()
    if found is None:
        raise UsageError(f"the bedrock provider found no AWS credentials: set {CHAIN}")
    region = session.get_config_variable("region") or ""
    return found, f"the AWS credential chain ({getattr(found, 'method', 'unknown')})", str(region)


def make_bedrock(name: str = "", *, settings: ProviderSettings | None = None, **options: Any) -> BedrockClient:
    settings = settings or ProviderSettings()
    if not name:
        raise UsageError("model 'bedrock' needs a model id: write it as bedrock/MODEL_ID "
                         "(e.g. bedrock/anthropic.claude-sonnet-4-20250514-v1:0)")
    if settings.api_key_env:
        raise UsageError(f"bedrock/{name} signs with the AWS credential chain, not an API key: drop "
                         f"--model-api-key-env {settings.api_key_env} and set $AWS_PROFILE or $AWS_ACCESS_KEY_ID")
    region_arg = str(options.pop("region", "") or "")
    api = str(options.pop("api", "") or "")
    if api not in ("", "converse", "invoke"):
        raise UsageError(f"--model-arg api={api} is not a Bedrock API: use api=converse or api=invoke")
    params = generation_params("bedrock", f"bedrock/{name}", options)
    credentials, source, profile_region = _credentials(settings)
    region = region_arg or settings.env("AWS_REGION") or settings.env("AWS_DEFAULT_REGION") or profile_region
    if not region:
        raise UsageError(f"bedrock/{name} needs a region: set $AWS_REGION or pass --model-arg region=us-east-1")
    base_url = settings.base_url or f"https://bedrock-runtime.{region}.amazonaws.com"
    anthropic = "anthropic" in name.lower()
    converse = api == "converse" or (not api and not anthropic)
    if api == "invoke" and not anthropic:
        raise UsageError(f"--model-arg api=invoke speaks Anthropic Messages: bedrock/{name} is not an Anthropic "
                         "model; leave api unset to use Converse")
    return BedrockClient(name, str(base_url), settings, credentials=credentials, region=region, converse=converse,
                         key_source=source, params=params)


__all__ = ["BedrockClient", "make_bedrock"]
