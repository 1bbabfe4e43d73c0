"""``GuardPolicy`` settings from a YAML file and the environment, via pydantic-settings.

Precedence, highest first: explicit arguments > ``CONTEXT_GUARD_*`` environment
variables (and the older names) > a ``.env`` file > a YAML file > defaults, the
order of pydantic-settings' own sources (and of pip or the AWS CLI: the
environment of one run overrides a file shared by many). The environment is read
by ``_env`` (``EnvSettingsSource``/``DotEnvSettingsSource``), the YAML file by
``YamlPolicySource``, pydantic-settings' ``YamlConfigSettingsSource`` with an
application config's ``agent.contextGuard`` block unwrapped and camelCase names
mapped to the fields. The merged values are validated once, by ``GuardPolicy``;
an error then names where the bad value came from: the variable, or the file,
line and key (with the closest setting for a misspelt one) and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, create_model
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from ._env import env_settings
from ._errors import ConfigError

__all__ = ["BLOCK_KEYS", "YamlPolicySource", "load_settings", "policy_block"]

BLOCK_KEYS = ("agent", "contextGuard", "context_guard")
"""An application config's nesting of the guard's block (``agent.contextGuard``)."""

P = TypeVar("P", bound=BaseModel)


def policy_block(data: Any, where: str = "Config") -> dict[str, Any]:
    """The settings mapping, unwrapped from an ``agent.contextGuard`` block."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where} must be a mapping, got {type(data).__name__}.",
            hint="write the settings as key: value pairs.",
        )
    block: Any = data
    for key in BLOCK_KEYS:
        if isinstance(block, Mapping) and isinstance(block.get(key), Mapping):
            block = block[key]
    return dict(block)


class _YamlBase(BaseSettings):
    model_config = SettingsConfigDict(extra="allow", validate_by_name=True)


@lru_cache(maxsize=4)
def _yaml_model(policy: type[BaseModel]) -> type[BaseSettings]:
    """Every policy field, untyped, under the policy's names and aliases.

    The YAML source maps an alias (``reserveTokens``) to its field's first name;
    unknown keys pass through, for the policy to name.
    """
    spec: dict[str, Any] = {
        name: (Any, Field(None, validation_alias=info.validation_alias))
        for name, info in policy.model_fields.items()
    }
    model: type[BaseSettings] = create_model(
        "GuardPolicyYaml", __base__=_YamlBase, **spec
    )
    return model


class YamlPolicySource(YamlConfigSettingsSource):
    """pydantic-settings' YAML source for ``GuardPolicy`` settings.

    A missing or unreadable file, bad YAML or a document that is not a mapping
    raises ``ConfigError`` naming the file (and the line).
    """

    def __init__(self, policy: type[BaseModel], path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.open(encoding="utf-8").close()
        except OSError as exc:
            raise ConfigError(
                f"Cannot read config file {self.path}: {exc.strerror or exc}.",
                hint="check the path and permissions.",
            ) from None
        super().__init__(_yaml_model(policy), yaml_file=self.path)

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        import yaml

        try:
            data = yaml.safe_load(Path(file_path).read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{self.path}: not UTF-8 text (byte {exc.start}: {exc.reason}).",
                hint="save it as UTF-8.",
            ) from None
        except OSError as exc:
            raise ConfigError(
                f"Cannot read config file {self.path}: {exc.strerror or exc}.",
                hint="check the path and permissions.",
            ) from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(
                f"{self.path}{where}: invalid YAML ({getattr(exc, 'problem', exc)}).",
                hint="expected a mapping of GuardPolicy settings.",
            ) from None
        return policy_block(data, where=str(self.path))

    def key_line(self, names: set[str]) -> int | None:
        """The 1-based line of the first key named one of ``names``, if any."""
        import yaml

        try:
            stack = [yaml.compose(self.path.read_text(encoding="utf-8"))]
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return None
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if getattr(key, "value", None) in names:
                        return int(key.start_mark.line) + 1
                    stack.append(value)
        return None


def load_settings(
    policy: type[P],
    *,
    explicit: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    env_file: str | Path | None = None,
    yaml_file: str | Path | None = None,
    defaults: Mapping[str, Any] | None = None,
    read_env: bool = True,
) -> P:
    """``policy`` from explicit > environment > ``.env`` > YAML > ``defaults``.

    ``environ`` defaults to ``os.environ``; ``read_env=False`` skips it (and
    ``env_file``). An unknown ``CONTEXT_GUARD_*`` name is warned about once.
    """
    model = _yaml_model(policy)
    # Through pydantic-settings' init source too: aliases become field names, so
    # ``reserveTokens`` given here overrides ``reserve_tokens`` from a file.
    explicit = InitSettingsSource(model, dict(explicit or {}))()
    data: dict[str, Any] = InitSettingsSource(model, dict(defaults or {}))()
    yaml_source = None
    from_yaml: set[str] = set()
    if yaml_file is not None:
        yaml_source = YamlPolicySource(policy, yaml_file)
        values = yaml_source()
        data.update(values)
        from_yaml = set(values)
    variables: dict[str, tuple[str, str]] = {}
    if read_env:
        values, variables = env_settings(list(policy.model_fields), environ, env_file)
        data.update(values)
    data.update(explicit)
    try:
        return policy(**data)
    except ConfigError as exc:
        field = exc.field or ""
        if explicit and field in explicit:
            raise
        if field in variables:
            var, raw = variables[field]
            raise ConfigError(
                f"Environment variable {var}={raw!r}: {_message(exc)}",
                field=exc.field,
                hint=f"set {var} to a valid value or unset it.",
            ) from None
        if yaml_source is not None and field in from_yaml:
            raise _in_yaml(exc, yaml_source, policy) from None
        raise


def _message(error: ConfigError) -> str:
    """The error's message without its own "Fix:" hint."""
    return str(error).rsplit(" Fix: ", 1)[0]


def _in_yaml(
    error: ConfigError, source: YamlPolicySource, policy: type[BaseModel]
) -> ConfigError:
    """``error`` located in the YAML file: the file and the key's line."""
    field = error.field or ""
    names = {field, field.split(".")[0]}
    info = policy.model_fields.get(field)
    names.update(getattr(info and info.validation_alias, "choices", ()))
    line = source.key_line({str(n) for n in names})
    where = f"{source.path} line {line}" if line else str(source.path)
    return ConfigError(
        f"{where}: {_message(error)}", field=error.field, hint=error.hint
    )
