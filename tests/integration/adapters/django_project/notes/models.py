"""Two indexed models, one declared each way."""

from __future__ import annotations

from django.db import models

from producer.django import indexed


class Note(models.Model):
    """Indexed into ``django_notes`` by the project's ``VECTORSYNC["MODELS"]``."""

    title = models.CharField(max_length=200)
    body = models.TextField()
    kind = models.CharField(max_length=20, default="note")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "notes"


@indexed("django_tickets")
class Ticket(models.Model):
    """Indexed into ``django_tickets`` by its decorator."""

    subject = models.CharField(max_length=200)
    body = models.TextField()

    class Meta:
        app_label = "notes"
