"""The Django app: ``"producer.django"`` in ``INSTALLED_APPS``."""

from __future__ import annotations

from django.apps import AppConfig, apps

from producer.django import checks
from producer.django.conf import apply_config, declared_models
from producer.django.signals import watch

__all__ = ["VectorsyncConfig"]


class VectorsyncConfig(AppConfig):
    """At start: the settings file named, the models of ``VECTORSYNC["MODELS"]`` watched, the checks added."""

    name = "producer.django"
    label = "vectorsync"
    verbose_name = "vectorsync"

    def ready(self) -> None:
        apply_config()
        for label, collections in declared_models().items():
            watch(apps.get_model(label), collections)
        checks.register()
