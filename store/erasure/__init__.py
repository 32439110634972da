"""Erasure: a deleted record's derived copies go with it (``copies``), and ``vectorsync forget`` erases records on
demand with a receipt of every place looked in (``receipt``)."""

from store.erasure.copies import Erased, erase
from store.erasure.receipt import Place, Receipt, forget

__all__ = ["Erased", "Place", "Receipt", "erase", "forget"]
