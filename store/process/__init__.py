"""What one process shares: its default client and producer (``defaults``), which ``store.query``'s and
``producer``'s functions use as ``httpx.get`` uses a Client."""
