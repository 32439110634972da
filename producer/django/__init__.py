"""Django: a model's saves and deletes reach its collection through the ORM's signals (``vectorsync[django]``).

    INSTALLED_APPS = [..., "producer.django"]
    VECTORSYNC = {
        "CONFIG": BASE_DIR / "vectorsync.toml",    # the settings file (VECTORSYNC_CONFIG, when set, wins)
        "MODELS": {"notes.Note": "notes"},        # a model's label -> its collection, or a list of them
    }

    from producer.django import indexed           # or, in models.py, instead of MODELS:

    @indexed("notes")
    class Note(models.Model): ...

A save or a delete enqueues ``index_record(collection, pk)`` once its transaction commits
(``transaction.on_commit``): a rolled-back save sends nothing. The worker needs no Django: the collection's
source is the model's table (``kind = "sql"``), and ``manage.py check`` says when the settings do not say so.
``manage.py vectorsync ...`` runs the ``vectorsync`` command with the project's settings. Writes that send
no signal (``queryset.update()``, ``bulk_create``, ``bulk_update``, raw SQL) reach the index through change
capture (``source.capture = "trigger"``) or a ``reindex``.
"""

from producer.django.signals import indexed, watch, watched

__all__ = ["indexed", "watch", "watched"]
