"""Where each setting's value came from, recorded once, while the settings load.

pydantic-settings reads the program's arguments, the environment and the settings file
in that order of priority; ``RecordedSettings`` wraps each source so the first one that
gives a field is remembered as its origin. Fields no source gave get
``default_origin`` (the profile's, or the default). ``origins`` holds the result;
nothing works it out again.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Self

from pydantic import PrivateAttr, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from pydantic_settings.sources import DotEnvSettingsSource, EnvSettingsSource

__all__ = ["RecordedSettings"]

_RECORDING: ContextVar[dict[str, str] | None] = ContextVar("settings_origins", default=None)


class _Recorded(PydanticBaseSettingsSource):
    """One source, unchanged, that notes the fields it gave."""

    def __init__(self, inner: PydanticBaseSettingsSource, label: str) -> None:
        super().__init__(inner.settings_cls)
        self._inner = inner
        self._label = label

    def _set_current_state(self, state: dict[str, Any]) -> None:
        self._inner._set_current_state(state)

    def _set_settings_sources_data(self, states: dict[str, dict[str, Any]]) -> None:
        self._inner._set_settings_sources_data(states)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._inner.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        values = self._inner()
        origins = _RECORDING.get()
        if origins is not None:
            for name in values:
                origins.setdefault(name, self._label)
        return values


def _label(source: PydanticBaseSettingsSource) -> str:
    if isinstance(source, DotEnvSettingsSource):
        return str(source.env_file)
    if isinstance(source, EnvSettingsSource):
        return "environment"
    return "given"  # by the program that built the settings


class RecordedSettings(BaseSettings):
    """Settings that know where each of their values came from."""

    _origins: dict[str, str] = PrivateAttr(default_factory=dict)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The usual sources, each noting which fields it gave."""
        _RECORDING.set({})
        sources = (init_settings, env_settings, dotenv_settings)
        return tuple(_Recorded(source, _label(source)) for source in sources)

    @model_validator(mode="after")
    def _record_origins(self) -> Self:
        given = _RECORDING.get() or {}
        _RECORDING.set(None)
        for name in type(self).model_fields:
            self._origins[name] = given.get(name) or self.default_origin(name)
        return self

    def default_origin(self, name: str) -> str:
        """The origin of a field no source gave."""
        return "default"

    @property
    def origins(self) -> dict[str, str]:
        """Where each field's value came from, as recorded when the settings loaded."""
        return dict(self._origins)

    def with_values(self, origin: str, **values: Any) -> Self:
        """A copy with ``values`` changed and their origin noted (e.g. fitted to the model)."""
        changed = self.model_copy(update=values)
        changed._origins = {**self._origins, **dict.fromkeys(values, origin)}
        return changed
